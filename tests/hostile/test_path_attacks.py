"""Every path a config names stays inside the workspace: each attack is refused by `claw validate` and
by `claw build` (exit 2, one line naming the file and field) before any request is sent."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.evaluate import evaluate_checks
from clawstore.evaluate.inputs import check_inputs
from clawstore.host.scratch import remove_tree
from clawstore.testing.standin import StandIn
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.judging import eval_profile
from tests.support.nesting import nest
from tests.support.workspace import Workspace

CASE = "configs/cases/alpha/test.yaml"


def _case_dir(w: Workspace) -> Path:
    return w.configs / "cases" / "alpha"


def _attach(written: str) -> Callable[[Workspace], None]:
    return lambda w: w.edit("cases/alpha/test.yaml", lambda d: d["input"].update(attachments=[written]))


def _link_then_attach(name: str, target: str, written: str) -> Callable[[Workspace], None]:
    def apply(w: Workspace) -> None:
        os.symlink(target, _case_dir(w) / name)
        _attach(written)(w)
    return apply


def _source(written: str) -> Callable[[Workspace], None]:
    def change(d: dict) -> None:
        d["input"]["messages"][1] = {"role": "user", "source": {"path": written}}
    return lambda w: w.edit("cases/alpha/test.yaml", change)


def _linked_source(w: Workspace) -> None:
    os.symlink("/etc/hostname", _case_dir(w) / "prompt.yaml")
    _source("prompt.yaml")(w)


def _hook(written: str) -> Callable[[Workspace], None]:
    check = {"check_id": "h", "python_hook": {"path": written, "callable_name": "check"}}
    return lambda w: w.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[check]))


def _linked_hook(w: Workspace) -> None:
    outside = w.root.parent / "outside_hook.py"
    outside.write_text("def check(artifact):\n    return True\n")
    os.symlink(outside, _case_dir(w) / "hook.py")
    _hook("hook.py")(w)


def _check_target(w: Workspace) -> None:
    check = {"check_id": "c", "declarative": {"kind": "file_contains", "path": "../../../../../../etc/shadow",
                                              "text": "root:"}}
    w.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[check]))


def _linked_case_folder(w: Workspace) -> None:
    outside = w.root.parent / "outside_case"
    outside.mkdir()
    (_case_dir(w) / "test.yaml").rename(outside / "test.yaml")
    _case_dir(w).rmdir()
    os.symlink(outside, _case_dir(w))


# attack name -> (how to plant it, the field the refusal must name)
ATTACKS: dict[str, tuple[Callable[[Workspace], None], str]] = {
    "attachment ../ to /etc/passwd": (_attach("../../../../../../../../etc/passwd"), "input.attachments[0]"),
    "attachment absolute /etc/passwd": (_attach("/etc/passwd"), "input.attachments[0]"),
    "attachment ~ to the home directory": (_attach("~/.bashrc"), "input.attachments[0]"),
    "attachment symlink to /etc/shadow": (_link_then_attach("shadow.txt", "/etc/shadow", "shadow.txt"),
                                          "input.attachments[0]"),
    "attachment in a symlinked folder": (_link_then_attach("etcdir", "/etc", "etcdir/passwd"),
                                         "input.attachments[0]"),
    "message source ../ to /etc/passwd": (_source("../../../../../../../../etc/passwd"),
                                          "input.messages[1].source.path"),
    "message source absolute": (_source("/etc/hostname"), "input.messages[1].source.path"),
    "message source symlink": (_linked_source, "input.messages[1].source.path"),
    "hook file absolute": (_hook("/etc/passwd"), "deterministic_checks[0].python_hook.path"),
    "hook file symlink out": (_linked_hook, "deterministic_checks[0].python_hook.path"),
    "check target ../ to /etc/shadow": (_check_target, "deterministic_checks[0].declarative.path"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_path_leading_out_is_refused_before_any_request(attack: str, ws: Workspace,  # noqa: F811
                                                          standin: StandIn, tmp_path: Path) -> None:
    plant, field = ATTACKS[attack]
    plant(ws)
    validate = run_claw(ws.root, "validate")
    assert validate.code == 2 and "Traceback" not in validate.stdout + validate.stderr
    assert f"{CASE}: {field}: " in validate.stdout + validate.stderr
    assert "outside the workspace" in validate.stdout + validate.stderr
    build = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp")
    assert build.refused_cleanly, build
    assert f"{CASE}: {field}: " in build.stderr and "outside the workspace" in build.stderr
    assert standin.requests == []
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.zst"))


def test_a_symlinked_case_folder_leading_out_is_refused(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    _linked_case_folder(ws)
    build = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp")
    assert build.refused_cleanly, build
    assert CASE in build.stderr and "outside the workspace" in build.stderr
    assert standin.requests == []


@pytest.mark.parametrize("written", ["../../../../../../../etc/passwd", "../../../no-such-prompt.md"])
def test_a_judge_prompt_leading_out_is_refused(ws: Workspace, standin: StandIn, written: str) -> None:  # noqa: F811
    # outside is named before missing: how deep the workspace sits must not change the answer
    eval_profile(ws, judge_system_prompt=None, judge_system_prompt_path=written)
    build = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert build.refused_cleanly, build
    assert "judge_system_prompt_path" in build.stderr and "outside the workspace" in build.stderr
    assert standin.requests == []


def test_a_symlink_that_stays_inside_is_fine(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    shared = ws.configs / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("inside the workspace\n")
    os.symlink("../../shared", _case_dir(ws) / "linked")
    _attach("linked/notes.txt")(ws)
    build = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp")
    assert build.code == 0, build
    sent = [m["content"] for r in standin.requests for m in r["messages"]]
    assert any("inside the workspace" in c for c in sent)


def test_an_absolute_check_path_never_reads_a_host_file_outside(tmp_path: Path) -> None:
    """The host fallback of a file check is an oracle on host files: it only answers inside the workspace."""
    case_dir = tmp_path / "ws" / "configs" / "cases" / "alpha"
    case_dir.mkdir(parents=True)
    (case_dir / "mine.txt").write_text("root: inside\n")
    checks = [{"check_id": "shadow", "declarative": {"kind": "file_contains", "path": "/etc/passwd", "text": "root:"}},
              {"check_id": "exists", "declarative": {"kind": "file_exists", "path": "/etc/passwd"}},
              {"check_id": "inside", "declarative": {"kind": "file_contains", "path": str(case_dir / "mine.txt"),
                                                     "text": "root:"}}]
    artifact = {"status": "success", "trace": [], "runner_type": "llm_probe"}
    result = evaluate_checks(checks, artifact, case_source_path=case_dir / "test.yaml")
    assert {c["check_id"]: c["outcome"] for c in result["checks"]} == {
        "shadow": "failed", "exists": "failed", "inside": "passed"}
    assert check_inputs(checks, case_dir)["/etc/passwd"] is None  # not even its digest enters a key


def test_an_agent_workspace_leading_out_is_refused(ws: Workspace) -> None:  # noqa: F811
    agent = ws.configs / "agents" / "evil"
    agent.mkdir(parents=True)
    (agent / "agent.yaml").write_text("schema_version: 1\nagent_id: evil\ntitle: Evil\n"
                                      "openclaw:\n  agent:\n    id: evil\n")
    os.symlink("/etc", agent / "workspace")
    validate = run_claw(ws.root, "validate")
    assert validate.code == 2 and "Traceback" not in validate.stdout + validate.stderr
    assert "configs/agents/evil/agent.yaml" in validate.stdout and "workspace resolves to /etc" in validate.stdout


def test_an_agent_workspace_nested_thousands_deep_is_refused(ws: Workspace) -> None:  # noqa: F811
    # Copying it into a run (shutil.copytree) recursed past Python's limit: `claw plan` and `claw build`
    # ended in a RecursionError traceback.
    agent = ws.configs / "agents" / "deep"
    (agent / "workspace").mkdir(parents=True)
    (agent / "agent.yaml").write_text("schema_version: 1\nagent_id: deep\ntitle: Deep\n"
                                      "openclaw:\n  agent:\n    id: deep\n")
    nest(agent / "workspace", 1200)
    try:
        validate = run_claw(ws.root, "validate")
        assert validate.code == 2 and "Traceback" not in validate.stdout + validate.stderr
        assert "configs/agents/deep/agent.yaml: workspace/ cannot be an agent's template: it nests directories " \
               "more than 256 deep" in validate.stdout
    finally:
        remove_tree(agent / "workspace")  # (pytest's clean-up of old temporary directories recurses)


@pytest.mark.parametrize("written", ["../../etc/passwd", "notes/../../x.md", "/work/workspace/..", "."])
def test_a_workspace_check_path_leaving_the_workspace_is_refused(ws: Workspace, written: str) -> None:  # noqa: F811
    # it passed validate: `../../etc/passwd` then matched any workspace file named passwd (by its basename)
    check = {"check_id": "w", "declarative": {"kind": "openclaw_workspace_file_present", "relative_path": written}}
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[check]))
    validate = run_claw(ws.root, "validate")
    assert validate.code == 2 and "Traceback" not in validate.stdout + validate.stderr
    assert f"{CASE}: deterministic_checks[0].declarative.relative_path: {written} " in validate.stdout


def test_a_workspace_check_path_inside_validates(ws: Workspace) -> None:  # noqa: F811
    check = {"check_id": "w", "declarative": {"kind": "openclaw_workspace_file_present",
                                              "relative_path": "./notes/../report.md"}}
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[check]))
    assert run_claw(ws.root, "validate").code == 0
