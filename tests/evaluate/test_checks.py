"""Declarative checks of every kind against real files and RunArtifact dicts."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pytest
import yaml

from clawstore.evaluate import DictSandboxFiles, DictWorkspaceFiles, check_inputs, evaluate_checks

from .helpers import artifact, decl, final, msg, tool_call, tool_result


def one(check: dict, art: dict, **kw) -> dict:
    result = evaluate_checks([check], art, **kw)
    assert result["summary"]["total_checks"] == 1
    return result["checks"][0]


# --- final_response_present ---------------------------------------------------------------------


def test_final_response_present_passes_and_fails() -> None:
    check = decl("final", "final_response_present")
    ok = one(check, artifact(trace=[msg("user", "hi"), final("The answer is 4.")]))
    assert ok["outcome"] == "passed" and ok["outputs"]["content_length"] == len("The answer is 4.")
    assert ok["dimensions"] == ["process"]  # the documented default when the check lists none
    empty = one(check, artifact(status="invalid", trace=[final("   ")]))
    assert empty["outcome"] == "failed"


def test_final_response_present_openclaw_rejects_error_payloads() -> None:
    check = decl("final", "final_response_present", ["task"])
    visible = '{"payloads": [{"text": "Created report.md"}], "meta": {"agentMeta": {}}}'
    good = one(check, artifact("openclaw", trace=[final(visible)]))
    assert good["outcome"] == "passed" and good["dimensions"] == ["task"]
    # a non-success openclaw run fails even though stderr text became the final output
    failed_run = one(check, artifact("openclaw", status="failed", trace=[final("FailoverError: no credits")]))
    assert failed_run["outcome"] == "failed" and "status 'failed'" in failed_run["message"]
    raw = one(check, artifact("openclaw", trace=[final('{"payloads": [], "meta": {"agentMeta": {"usage": {}}}}')]))
    assert raw["outcome"] == "failed" and "raw OpenClaw payload" in raw["message"]
    error_text = one(check, artifact("openclaw", trace=[final("Error: gateway closed the connection")]))
    assert error_text["outcome"] == "failed"


def test_final_response_present_keeps_json_answers_of_llm_probe() -> None:
    check = decl("final", "final_response_present")
    res = one(check, artifact(trace=[final('{"answer": 4, "unit": "apples"}')]))
    assert res["outcome"] == "passed" and res["outputs"]["content_length"] == len('{"answer": 4, "unit": "apples"}')
    # the same text from openclaw is an envelope only if it is an error or a payload without text
    err = one(check, artifact("openclaw", trace=[final('{"error": "model not found"}')]))
    assert err["outcome"] == "failed"


def test_final_response_present_openclaw_falls_back_to_key_output_file() -> None:
    check = decl("final", "final_response_present")
    art = artifact("openclaw", trace=[], input_context={"openclaw": {"expected_artifact": "report.md"}})
    res = one(check, art, workspace_files={"report.md": b"# Report\nall done\n"})
    assert res["outcome"] == "passed" and res["outputs"]["source"] == "workspace:report.md"


# --- tool_call_count ----------------------------------------------------------------------------


def test_tool_call_count() -> None:
    art = artifact(trace=[tool_call("c1", "exec_shell", {"command": "ls"}), tool_result("c1", {"output": "x"}),
                          tool_call("c2", "read_file", {"path": "/tmp/a"}), final("done")])
    ok = one(decl("n", "tool_call_count", count=2), art)
    assert ok["outcome"] == "passed" and ok["outputs"]["actual_count"] == 2
    assert ok["dimensions"] == ["efficiency", "process"]
    bad = one(decl("n", "tool_call_count", count=3), art)
    assert bad["outcome"] == "failed" and "expected 3" in bad["message"]
    spec_error = one(decl("n", "tool_call_count", count=-1), art)
    assert spec_error["outcome"] == "error" and "count" in spec_error["message"]


def test_tool_call_count_openclaw_uses_tool_summary() -> None:
    meta = {"openclaw": {"metadata": {"observable_summary": {"tool_summary": {"calls": 3, "tools": ["write"]}}}}}
    art = artifact("openclaw", trace=[final("ok")], runner_metadata=meta)
    res = one(decl("n", "tool_call_count", count=3), art)
    assert res["outcome"] == "passed" and res["outputs"]["counted_from"] == "openclaw_tool_summary"


# --- host / sandbox file checks -----------------------------------------------------------------


def test_file_checks_on_host_relative_to_case(tmp_path: Path) -> None:
    case = tmp_path / "case"
    (case / "data").mkdir(parents=True)
    (case / "data" / "expected.txt").write_text("hello marker\n")
    src = case / "test.yaml"
    art = artifact(trace=[final("x")])
    checks = [
        decl("exists", "file_exists", path="data/expected.txt"),
        decl("missing", "file_exists", path="data/nope.txt"),
        decl("contains", "file_contains", path="data/expected.txt", text="marker"),
        decl("lacks", "file_contains", path="data/expected.txt", text="absent"),
        decl("dir", "path_exists", path="data"),
        decl("nodir", "path_exists", path="nodir"),
    ]
    res = evaluate_checks(checks, art, case_source_path=src)
    outcomes = {c["check_id"]: c["outcome"] for c in res["checks"]}
    assert outcomes == {"exists": "passed", "missing": "failed", "contains": "passed", "lacks": "failed",
                        "dir": "passed", "nodir": "failed"}
    assert res["checks"][0]["outputs"]["path"] == "data/expected.txt"  # as the case names it
    assert str(tmp_path) not in json.dumps(res)  # (where the workspace sits is no part of a result)
    assert res["checks"][0]["outputs"]["location"] == "host"
    assert res["summary"] == {"total_checks": 6, "passed_checks": 3, "failed_checks": 3, "error_checks": 0}
    assert res["passed"] is False
    # default dimension for file checks is task: 3 of 6 passed → 5.0
    assert res["dimension_scores"]["task"] == pytest.approx(5.0)


def test_absolute_paths_look_in_the_run_sandbox_first(tmp_path: Path) -> None:
    host_file = tmp_path / "shared.txt"
    host_file.write_text("stale content from another model\n")
    sandbox = DictSandboxFiles({str(host_file): b"fresh marker written by this run\n"})
    art = artifact(trace=[final("x")])
    res = one(decl("c", "file_contains", path=str(host_file), text="fresh marker"), art, sandbox_files=sandbox)
    assert res["outcome"] == "passed" and res["outputs"]["location"] == "run sandbox"
    # without the sandbox, the host copy answers (and it lacks the marker)
    host = one(decl("c", "file_contains", path=str(host_file), text="fresh marker"), art)
    assert host["outcome"] == "failed" and host["outputs"]["location"] == "host"
    # a path only the sandbox has: its directory exists there too
    only = DictSandboxFiles({"/tmp/claw-eval-only/out/result.txt": "x"})
    assert one(decl("d", "path_exists", path="/tmp/claw-eval-only/out"), art, sandbox_files=only)["outcome"] == "passed"
    assert one(decl("f", "file_exists", path="/tmp/claw-eval-only/out"), art, sandbox_files=only)["outcome"] == "failed"


# --- status_is / output_artifact_present --------------------------------------------------------


def test_status_is() -> None:
    art = artifact(status="timed_out", trace=[])
    assert one(decl("s", "status_is", status="timed_out"), art)["outcome"] == "passed"
    res = one(decl("s", "status_is", status="success"), art)
    assert res["outcome"] == "failed" and res["outputs"] == {"expected_status": "success", "actual_status": "timed_out"}
    assert one(decl("s", "status_is", status="bogus"), art)["outcome"] == "error"


def test_output_artifact_present() -> None:
    refs = [{"artifact_id": "openclaw_key_output_1", "artifact_type": "openclaw_key_output", "uri": "x"}]
    art = artifact("openclaw", trace=[], output_artifacts=refs)
    ok = one(decl("a", "output_artifact_present", artifact_type="openclaw_key_output"), art)
    assert ok["outcome"] == "passed" and ok["outputs"]["matched_count"] == 1
    both = one(decl("a", "output_artifact_present", artifact_type="openclaw_key_output", artifact_id="other"), art)
    assert both["outcome"] == "failed"
    # The reference's `artifact_type?`: no matcher at all passes on any output artifact, fails on none.
    bare = one(decl("a", "output_artifact_present"), art)
    assert bare["outcome"] == "passed" and bare["outputs"]["matched_count"] == 1
    none = one(decl("a", "output_artifact_present"), artifact("openclaw", trace=[], output_artifacts=[]))
    assert none["outcome"] == "failed" and none["outputs"]["matched_count"] == 0


# --- openclaw_workspace_file_present ------------------------------------------------------------

WORKSPACE = {
    "AGENTS.md": b"# agents",
    "report.md": "# Informe\nCanción de PRUEBA: second-turn-marker\n".encode(),
    "notes/draft.md": b"# Draft\nfirst-turn-marker\n",
    "a/dup.txt": b"one",
    "b/dup.txt": b"two",
    "bin.dat": b"\xff\xfe\x00binary",
}


def ws(**fields) -> dict:
    return decl("w", "openclaw_workspace_file_present", ["process"], **fields)


@pytest.mark.parametrize(
    ("fields", "outcome", "matched"),
    [
        ({"relative_path": "report.md"}, "passed", "report.md"),
        ({"relative_path": "./notes/../report.md"}, "passed", "report.md"),
        ({"relative_path": "/work/workspace/notes/draft.md"}, "passed", "notes/draft.md"),
        ({"relative_path": "draft.md"}, "passed", "notes/draft.md"),  # undeclared file, unambiguous basename
        ({"relative_path": "dup.txt"}, "failed", None),  # ambiguous basename
        ({"relative_path": "missing.md"}, "failed", None),
        ({"relative_path": "report.md", "contains": "second-turn-marker"}, "passed", "report.md"),
        ({"relative_path": "report.md", "contains": "SECOND-TURN-MARKER"}, "failed", "report.md"),
        ({"relative_path": "report.md", "contains_all": ["cancion de prueba", "INFORME"]}, "passed", "report.md"),
        ({"relative_path": "report.md", "contains_all": ["informe", "absent"]}, "failed", "report.md"),
        ({"relative_path": "report.md", "contains_any": ["nope", "CANCIÓN"]}, "passed", "report.md"),
        ({"relative_path": "report.md", "contains_any": ["nope", "nada"]}, "failed", "report.md"),
        ({"relative_path": "bin.dat", "contains": "binary"}, "failed", "bin.dat"),
    ],
)
def test_workspace_file_present(fields: dict, outcome: str, matched: str | None) -> None:
    art = artifact("openclaw", trace=[final("done")])
    res = one(ws(**fields), art, workspace_files=DictWorkspaceFiles(WORKSPACE))
    assert res["outcome"] == outcome, res["message"]
    assert res["outputs"]["matched_path"] == matched


def test_workspace_file_present_needs_openclaw_and_a_workspace() -> None:
    res = one(ws(relative_path="report.md"), artifact("llm_probe", trace=[]), workspace_files=WORKSPACE)
    assert res["outcome"] == "failed" and "not an openclaw run" in res["message"]
    res = one(ws(relative_path="report.md"), artifact("openclaw", trace=[]))
    assert res["outcome"] == "error" and "workspace tree is not available" in res["message"]
    res = one(ws(relative_path="report.md", contains="x", contains_any=["y"]), artifact("openclaw"), workspace_files={})
    assert res["outcome"] == "error" and "either 'contains'" in res["message"]


# --- results, scoring, config models, inputs ----------------------------------------------------


def test_unknown_kind_and_dimension_scoring() -> None:
    art = artifact(trace=[final("yes")])
    checks = [
        decl("a", "final_response_present", ["task", "process"]),
        decl("b", "status_is", ["task"], status="failed"),
        decl("c", "no_such_kind", ["spark"]),
    ]
    res = evaluate_checks(checks, art)
    assert [c["outcome"] for c in res["checks"]] == ["passed", "failed", "error"]
    assert "unknown declarative check kind" in res["checks"][2]["message"]
    scores = res["dimension_scores"]
    assert scores["task"] == pytest.approx(5.0) and scores["process"] == pytest.approx(10.0)
    assert scores["spark"] is None and scores["autonomy"] is None  # error excluded, no checks → None
    assert any("'c'" in w for w in res["warnings"])
    for c in res["checks"]:
        assert set(c) >= {"check_id", "kind", "source", "outcome", "message", "dimensions", "outputs"}


def test_accepts_config_models(tmp_path: Path) -> None:
    from clawstore.config.models import DeterministicCheck

    (tmp_path / "out.txt").write_text("ok marker")
    model = DeterministicCheck.model_validate(
        {"check_id": "m", "declarative": {"kind": "file_contains", "path": "out.txt", "text": "marker"}}
    )
    res = evaluate_checks([model], artifact(trace=[]), case_source_path=tmp_path / "test.yaml")
    assert res["checks"][0]["outcome"] == "passed" and res["checks"][0]["kind"] == "file_contains"


def test_check_inputs_digests_host_files_and_hooks(tmp_path: Path) -> None:
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "h.py").write_text("def f(a):\n    return True\n")
    (tmp_path / "data.txt").write_bytes(b"v1")
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "checks.py").write_text("def g():\n    return True\n")
    checks = [
        decl("a", "file_contains", path="data.txt", text="v"),
        decl("b", "file_exists", path="absent.txt"),
        decl("c", "path_exists", path=str(tmp_path / "mypkg")),
        decl("d", "final_response_present"),
        {"check_id": "h", "python_hook": {"path": "hooks/h.py", "callable_name": "f"}},
        {"check_id": "i", "python_hook": {"import_path": "mypkg.checks", "callable_name": "g"}},
        {"check_id": "j", "python_hook": {"import_path": "no_such_pkg_xyz.mod", "callable_name": "g"}},
    ]
    first = check_inputs(checks, tmp_path)
    assert first == {
        "absent.txt": None,  # (as the case names them: the key does not depend on where it sits)
        "data.txt": blake3.blake3(b"v1").hexdigest(),
        "hooks/h.py": blake3.blake3(b"def f(a):\n    return True\n").hexdigest(),
        str(tmp_path / "mypkg"): "dir",
        "python:mypkg.checks": blake3.blake3(b"def g():\n    return True\n").hexdigest(),
        "python:no_such_pkg_xyz.mod": None,
        # (with a python hook, every file of the case directory, which the hook may read: session 74)
        "mypkg/__init__.py": blake3.blake3(b"").hexdigest(),
        "mypkg/checks.py": blake3.blake3(b"def g():\n    return True\n").hexdigest(),
    }
    # A relative path that reads like an import hook's key keeps a key of its own.
    twins = check_inputs([decl("p", "file_exists", path="python:mypkg.checks"), checks[5]], tmp_path)
    assert {k: v for k, v in twins.items() if "python:" in k} == {
        "./python:mypkg.checks": None, "python:mypkg.checks": first["python:mypkg.checks"]}
    (tmp_path / "data.txt").write_bytes(b"v2")
    (tmp_path / "absent.txt").write_bytes(b"")
    second = check_inputs(checks, tmp_path)
    changed = {k for k in first if first[k] != second[k]}
    assert changed == {"data.txt", "absent.txt"}


def test_with_a_python_hook_the_case_directory_is_an_input(tmp_path: Path) -> None:
    """A hook may read any file of its case directory (docs/evaluation.md): each is an input of the checks, by its
    name there; a symlink by where it points, never followed; a pipe by its kind, never opened; no `__pycache__`."""
    (tmp_path / "hooks" / "__pycache__").mkdir(parents=True)
    (tmp_path / "hooks" / "h.py").write_text("def f(a):\n    return True\n")
    (tmp_path / "hooks" / "__pycache__" / "h.cpython-311.pyc").write_bytes(b"bytecode")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "expected.json").write_bytes(b"[4]")
    (tmp_path / "link.json").symlink_to("data/expected.json")
    os.mkfifo(tmp_path / "pipe")
    hook = {"check_id": "h", "python_hook": {"path": "hooks/h.py", "callable_name": "f"}}
    assert check_inputs([hook], tmp_path) == {
        "data/expected.json": blake3.blake3(b"[4]").hexdigest(),
        "hooks/h.py": blake3.blake3(b"def f(a):\n    return True\n").hexdigest(),
        "link.json": "link:data/expected.json",
        "pipe": "special",
    }
    assert check_inputs([decl("d", "final_response_present")], tmp_path) == {}  # no hook: only what checks name


def _digest(text: str) -> str:
    return blake3.blake3(text.encode()).hexdigest()


def test_an_import_hook_outside_the_case_has_its_package_and_the_modules_beside_it_as_inputs(tmp_path: Path) -> None:
    """An `import_path` hook found on the search path outside its case directory may import its package's other
    modules and the modules beside the package in that folder (its sandbox sees the whole folder): each is an input,
    by `python:./` and its path there (session 75: only the hook's module file was), and so are the other packages
    there; files there that are no module are not; a package found in the case directory adds nothing (the case
    directory is listed)."""
    shared, case = tmp_path / "hooks", tmp_path / "case"
    for name, text in {"pkg/__init__.py": "", "pkg/check.py": "def g():\n    return True\n", "pkg/util.py": "X = 1\n",
                       "pkg/data/expected.json": "[4]", "pkg/__pycache__/util.cpython-311.pyc": "bytecode",
                       "common.py": "Y = 2\n", "other/__init__.py": "", "README.md": "shared hooks\n",
                       "case/test.yaml": "{}\n"}.items():
        path = (tmp_path if name.startswith("case/") else shared) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    hook = {"check_id": "i", "python_hook": {"import_path": "pkg.check", "callable_name": "g"}}
    assert check_inputs([hook], case, search_path=[str(shared)]) == {
        "python:pkg.check": _digest("def g():\n    return True\n"),
        "python:./common.py": _digest("Y = 2\n"),
        "python:./other/__init__.py": _digest(""),
        "python:./pkg/__init__.py": _digest(""),
        "python:./pkg/check.py": _digest("def g():\n    return True\n"),
        "python:./pkg/data/expected.json": _digest("[4]"),
        "python:./pkg/util.py": _digest("X = 1\n"),
        "test.yaml": _digest("{}\n"),
    }
    # Listed once per build: a second case naming a hook in that folder takes the listing the first one made.
    folders: dict[tuple[str, str], dict[str, str | None]] = {}
    first = check_inputs([hook], case, search_path=[str(shared)], folders=folders)
    (shared / "pkg" / "util.py").write_text("X = 2\n")
    assert check_inputs([hook], case, search_path=[str(shared)], folders=folders) == first
    assert check_inputs([hook], case, search_path=[str(shared)])["python:./pkg/util.py"] == _digest("X = 2\n")
    # Found in the case directory, the package is one of its files (and the case directory comes first).
    (case / "pkg").mkdir()
    (case / "pkg" / "check.py").write_text("def g():\n    return False\n")
    assert check_inputs([hook], case, search_path=[str(shared)]) == {
        "python:pkg.check": _digest("def g():\n    return False\n"),
        "pkg/check.py": _digest("def g():\n    return False\n"),
        "test.yaml": _digest("{}\n"),
    }


def test_an_import_hook_in_the_python_installation_has_its_package_alone_as_inputs() -> None:
    """A hook package installed in site-packages: its own package's tree is an input, nothing else there (what a hook
    imports from the Python installation is not: docs/building.md, Keys)."""
    site_packages = os.path.dirname(os.path.dirname(yaml.__file__))
    hook = {"check_id": "i", "python_hook": {"import_path": "yaml.loader", "callable_name": "g"}}
    found = check_inputs([hook], None, search_path=[site_packages])
    assert found["python:./yaml/__init__.py"] == blake3.blake3(Path(yaml.__file__).read_bytes()).hexdigest()
    assert {name.split("/")[1] for name in found if name.startswith("python:./")} == {"yaml"}


def _unblocked(call: Callable[[], Any], pipe: Path) -> Any:
    """`call`'s value; failed if it is still blocked after 5 s, when a writer opening `pipe` and closing it at once
    lets a read waiting on it end (so that the test ends)."""
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(value=call()), daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
        pytest.fail(f"blocked on the named pipe {pipe.name} until a writer opened it")
    return done["value"]


@pytest.mark.parametrize("kind", ["file_exists", "file_contains", "path_exists"])
def test_a_check_naming_a_pipe_is_never_blocked_on(tmp_path: Path, kind: str) -> None:
    """A check target that is a named pipe in the case directory (validation refuses one only as a hook's file) is
    never opened: the key names it `special`, as a pipe in the case directory is, and the check finds no file there.
    Before session 75 `check_inputs` opened it to hash it, and `claw status`, `explain` and `build` of the campaign
    waited for a writer for ever; `file_contains` did too when the check ran."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "test.yaml").write_text("{}\n")
    check = decl("p", kind, path="pipe", **({"text": "x"} if kind == "file_contains" else {}))
    assert _unblocked(lambda: check_inputs([check], tmp_path), tmp_path / "pipe") == {"pipe": "special"}
    result = _unblocked(lambda: evaluate_checks([check], artifact(trace=[]), case_source_path=tmp_path / "test.yaml"),
                        tmp_path / "pipe")
    assert result["checks"][0]["outcome"] == ("passed" if kind == "path_exists" else "failed"), result


def test_check_results_redact_secrets(tmp_path: Path) -> None:
    secret = "sk-or-v1-" + "ab12" * 12
    (tmp_path / "f.txt").write_text("x")
    check = decl("s", "file_contains", path="f.txt", text=secret)
    res = one(check, artifact(trace=[]), case_source_path=tmp_path / "test.yaml")
    assert secret not in repr(res) and "[REDACTED]" in res["message"]
    kept = one(check, artifact(trace=[]), case_source_path=tmp_path / "test.yaml",
               security={"redact_secrets": False})
    assert secret in kept["message"]


def test_checks_given_as_their_specs_give_the_same_bytes_as_the_models() -> None:
    # A build makes each case's check specs once and passes them for every run of the case (a pydantic dump per
    # check and run before): the checks' output object, whose id later judgements' keys name, must not change.
    from clawstore.config.models.checks import DeterministicCheck
    from clawstore.evaluate.specs import check_spec
    from clawstore.values.canonical import canonical_json

    models = [DeterministicCheck.model_validate(c) for c in (
        {"check_id": "said", "description": "it answered", "dimensions": ["task", "closeness"],
         "declarative": {"kind": "final_response_present"}},
        {"check_id": "has", "declarative": {"kind": "file_contains", "path": "/work/out.txt", "text": "a b"}},
        {"check_id": "ok", "dimensions": ["process"], "declarative": {"kind": "status_is", "status": "success"}},
        {"check_id": "calls", "declarative": {"kind": "tool_call_count", "count": 0}},
    )]
    specs = [check_spec(m) for m in models]
    assert [check_spec(s) for s in specs] == specs
    art = artifact(trace=[{"type": "message", "role": "assistant", "content": "done"}])
    files = DictSandboxFiles({"/work/out.txt": "a b"})
    assert canonical_json(evaluate_checks(specs, art, sandbox_files=files)) == \
        canonical_json(evaluate_checks(models, art, sandbox_files=files))
