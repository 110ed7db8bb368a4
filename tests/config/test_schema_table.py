"""The config reference as a table (tests/config/schema_rows.py): every form it allows validates (`claw validate`
exit 0, a real process) and builds against the stand-in on 127.0.0.1; every form it forbids is exactly one line,
exit 2, naming the file and the field as written (list index included) and what was expected.

One workspace holds every allowed row (one file each), another every forbidden one: two validations answer all rows.
A suite's or profile's build runs in a workspace of the base files and its row's file alone (a build loads every
file of its workspace: in the workspace of all rows, loading was most of each build's time).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from tests.config.schema_rows import ALLOWED, DELETE, FORBIDDEN, Row, set_field
from tests.config.workspace_builder import claw, write_yaml
from tests.support.claw import Claw
from tests.support.judging import judge_reply
from tests.support.once import made_once
from tests.support.workspace import SECRET

BASES: dict[str, dict[str, Any]] = {
    "llm_case": {"schema_version": 1, "case_id": "base_case", "title": "Base case", "runner": {"type": "llm_probe"},
                 "input": {"messages": [{"role": "user", "content": "What is 2 + 2?"}]}, "tags": ["smoke"]},
    "claw_case": {"schema_version": 1, "case_id": "claw_base", "title": "OpenClaw case",
                  "runner": {"type": "openclaw"},
                  "input": {"messages": [{"role": "user", "content": "Write report.md."}]}, "tags": ["claw"]},
    "suite": {"schema_version": 1, "suite_id": "base", "title": "Base suite",
              "models": [{"model_id": "m1", "requested_model": "vendor/m1"}],
              "case_selection": {"include_case_ids": ["base_case"]}},
    "run_profile": {"schema_version": 1, "run_profile_id": "base", "title": "Base profile",
                    "runner_defaults": {"timeout_seconds": 5, "retries": 0},
                    "openclaw": {"agent_id": "helper", "image": "example/openclaw:1", "timeout_seconds": 60}},
    "evaluation_profile": {"schema_version": 1, "evaluation_profile_id": "base", "title": "Base judge",
                           "judges": [{"judge_id": "j1", "type": "llm_probe", "model": "judge/j1", "retries": 0}],
                           "judge_runs": [{"judge_run_id": "main", "judge_id": "j1", "repetitions": 2}]},
    "agent": {"schema_version": 1, "agent_id": "helper", "title": "Helper"},
}
ID_FIELDS = {"llm_case": "case_id", "claw_case": "case_id", "suite": "suite_id", "run_profile": "run_profile_id",
             "evaluation_profile": "evaluation_profile_id", "agent": "agent_id"}
PREFIX = {"llm_case": "c", "claw_case": "k", "suite": "s", "run_profile": "r", "evaluation_profile": "e",
          "agent": "a"}


def _file(kind: str, name: str) -> str:
    if kind.endswith("case"):
        return f"configs/cases/{name}/test.yaml"
    if kind == "agent":
        return f"configs/agents/{name}/agent.yaml"
    return f"configs/{kind}s/{name}.yaml"


def _support(root: Path, kind: str, name: str) -> None:
    """The files a case or agent names beside it (sources, an attachment, a hook; a workspace)."""
    here = (root / _file(kind, name)).parent
    if kind == "agent":
        (here / "workspace").mkdir(parents=True)
        (here / "workspace" / "AGENTS.md").write_text("# Agents\n", encoding="utf-8")
    if not kind.endswith("case"):
        return
    write_yaml(here / "messages" / "ask.yaml", [{"role": "user", "content": "Summarise the attachment."}])
    write_yaml(here / "messages" / "one.yaml", {"content": "One message.", "role": "user"})
    write_yaml(here / "messages" / "text.yaml", "Just text.")
    (here / "messages" / "ask.json").write_text('[{"role": "user", "content": "From JSON."}]', encoding="utf-8")
    (here / "files").mkdir()
    (here / "files" / "data.txt").write_text("numbers: 1 2 3\n", encoding="utf-8")
    (here / "hooks").mkdir()
    (here / "hooks" / "check.py").write_text("def check(artifact):\n    return True\n", encoding="utf-8")


def _write(root: Path, kind: str, name: str, doc: dict[str, Any]) -> str:
    rel = _file(kind, name)
    write_yaml(root / rel, doc)
    _support(root, kind, name)
    return rel


def _base_workspace(root: Path) -> None:
    for kind, doc in BASES.items():
        _write(root, kind, doc[ID_FIELDS[kind]], doc)
    prompts = root / "configs" / "evaluation_profiles" / "prompts"
    prompts.mkdir()
    for name in ("judge_system_default.md", "judge.md", "judge.txt"):
        (prompts / name).write_text("Grade the run.\nReturn JSON.\n", encoding="utf-8")


@dataclass(frozen=True)
class Written:
    row: Row
    path: str  # relative to the workspace root
    name: str  # the id the file declares (when the row leaves it)


def _row_workspace(root: Path, rows: list[Row]) -> list[Written]:
    _base_workspace(root)
    written = []
    for index, row in enumerate(rows):
        name = f"{PREFIX[row.kind]}{index:03d}"
        doc = copy.deepcopy(BASES[row.kind])
        doc[ID_FIELDS[row.kind]] = name
        for field, value in row.also:
            set_field(doc, field, value)
        set_field(doc, row.field, row.value if row.value is DELETE else copy.deepcopy(row.value))
        written.append(Written(row, _write(root, row.kind, name, doc), name))
    return written


def _validate(root: Path) -> tuple[int, dict[str, Any], list[str]]:
    """`claw validate` in a real process: (exit code, its --json report, the lines of its text report)."""
    as_json = claw("validate", "--json", str(root))
    as_text = claw("validate", str(root))
    assert as_json.returncode == as_text.returncode, as_text.stderr
    return as_json.returncode, json.loads(as_json.stdout), (as_text.stdout + as_text.stderr).splitlines()


@dataclass(frozen=True)
class Validated:
    root: Path
    written: list[Written]
    code: int
    report: dict[str, Any]
    lines: list[str]

    def errors(self, path: str) -> list[dict[str, str]]:
        return [e for e in self.report["errors"] if e["path"] == path]


def _validated(tmp_path_factory: pytest.TempPathFactory, name: str, write: Callable[[Path], list[Written]]
               ) -> Validated:
    """The workspace `write` makes, validated once in the run (made_once: two real processes, not two in each xdist
    worker), and written again here, the same files, for a test to build in."""
    def make(made: Path) -> None:
        write(made / "ws")
        (made / "validated.json").write_text(json.dumps(_validate(made / "ws")), encoding="utf-8")

    code, report, lines = json.loads((made_once(tmp_path_factory, f"schema-table-{name}", make) / "validated.json")
                                     .read_text(encoding="utf-8"))
    root = tmp_path_factory.mktemp(name) / "ws"
    return Validated(root, write(root), code, report, lines)


def _allowed_workspace(root: Path) -> list[Written]:
    written = _row_workspace(root, ALLOWED)
    llm_cases = ["base_case"] + [w.name for w in written if w.row.kind == "llm_case"]
    write_yaml(root / _file("suite", "every_case"), {**BASES["suite"], "suite_id": "every_case",
                                                     "case_selection": {"include_case_ids": llm_cases}})
    return written


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Validated:
    return _validated(tmp_path_factory, "allowed", _allowed_workspace)


@pytest.fixture(scope="module")
def forbidden(tmp_path_factory: pytest.TempPathFactory) -> Validated:
    return _validated(tmp_path_factory, "forbidden", lambda root: _row_workspace(root, FORBIDDEN))


def test_the_workspace_of_every_allowed_form_validates(allowed: Validated) -> None:
    assert allowed.code == 0 and allowed.report["ok"], allowed.report["errors"][:5]
    said = [line for line in allowed.lines if not line.startswith("warning: ")]  # (stderr's: an OpenClaw profile's
    assert said[-1].startswith("OK: ")  # runner_defaults, which only llm_probe reads, are said)


@pytest.mark.parametrize("row", ALLOWED, ids=lambda r: r.label)
def test_an_allowed_form_is_valid(allowed: Validated, row: Row) -> None:
    path = next(w.path for w in allowed.written if w.row is row)
    assert allowed.errors(path) == []


def test_the_workspace_of_forbidden_forms_exits_2_and_the_base_files_are_valid(forbidden: Validated) -> None:
    assert forbidden.code == 2 and not forbidden.report["ok"]
    rows = {w.path for w in forbidden.written}
    assert [e for e in forbidden.report["errors"] if e["path"] not in rows] == []


@pytest.mark.parametrize("row", FORBIDDEN, ids=lambda r: r.label)
def test_a_forbidden_form_is_one_line_naming_the_file_and_the_field(forbidden: Validated, row: Row) -> None:
    path = next(w.path for w in forbidden.written if w.row is row)
    errors = forbidden.errors(path)
    assert len(errors) == 1, errors
    assert errors[0]["field"] == row.error and row.says in errors[0]["message"], errors[0]
    lines = [line for line in forbidden.lines if line.startswith(f"{path}: ")]
    assert lines == [f"{path}: {row.error}: {errors[0]['message']}"]


@pytest.fixture(scope="module")
def standin_judging() -> Iterator[StandIn]:
    """A stand-in provider that answers every request with a judge's JSON."""
    with StandIn() as standin:
        standin.set_default(judge_reply(7.0))
        yield standin


def _in_workspace(root: Path, store: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> Claw:
    for key, value in {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
                       "CLAW_STORE": str(store)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(root)
    return Claw(root)


def _build_ok(claw_in: Claw, *args: str) -> dict[str, Any]:
    code, out, err = claw_in("build", *args, "--output", "json")
    assert code == 0 and "Traceback" not in err, out + err
    report = json.loads(out)
    assert report["failures"] == [], report["failures"]
    return report


def test_every_allowed_case_builds_and_is_judged(allowed: Validated, standin_judging: StandIn,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    claw_in = _in_workspace(allowed.root, allowed.root.parent / "store", standin_judging, monkeypatch)
    report = _build_ok(claw_in, "--suite", "every_case", "--run-profile", "base", "--evaluation-profile", "base")
    cases = 1 + sum(1 for w in allowed.written if w.row.kind == "llm_case")
    assert report["counts"]["executed"] >= cases


BUILT_KINDS = {"suite", "run_profile", "evaluation_profile"}


@pytest.fixture(scope="module")
def built_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for the builds of the allowed suites and profiles: the base case's run is paid once."""
    return tmp_path_factory.mktemp("built") / "store"


@pytest.mark.parametrize("row", [r for r in ALLOWED if r.kind in BUILT_KINDS and r.builds], ids=lambda r: r.label)
def test_an_allowed_suite_or_profile_builds(built_store: Path, standin_judging: StandIn, row: Row, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    [written] = _row_workspace(root, [row])
    chosen = {"suite": "base", "run_profile": "base", "evaluation_profile": "base", row.kind: written.name}
    _build_ok(_in_workspace(root, built_store, standin_judging, monkeypatch), "--suite", chosen["suite"],
              "--case", "base_case", "--run-profile", chosen["run_profile"],
              "--evaluation-profile", chosen["evaluation_profile"])


@pytest.mark.parametrize("row", [r for r in FORBIDDEN if r.kind in BUILT_KINDS], ids=lambda r: r.label)
def test_a_build_naming_a_forbidden_suite_or_profile_is_refused_in_one_line(
        row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (the forbidden suites and profiles one by one: a case too broken to read its id stops every build)
    root = tmp_path / "ws"
    [written] = _row_workspace(root, [row])
    chosen = {"suite": "base", "run_profile": "base", "evaluation_profile": "base", row.kind: written.path}
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(root)
    code, out, err = Claw(root)("build", "--suite", chosen["suite"], "--run-profile", chosen["run_profile"],
                                "--evaluation-profile", chosen["evaluation_profile"], "--dry-run")
    assert code == 2 and out == "", out + err
    assert len(err.splitlines()) == 1 and written.path in err and f": {row.error}: " in err, err
