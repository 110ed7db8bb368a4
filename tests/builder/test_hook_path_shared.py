"""A `path:` hook shared by several cases, outside each case directory (`path: ../../shared/check.py`, relative to
test.yaml as the config schema allows: docs/configuration.md, python_hook): the build runs it for both cases and its
outcome reaches the results; an edit of the hook or of a module beside it runs the checks of both cases again, asks the
judge again only when their results differ, and never runs a model again.

Before session 75 the hook ran confined to its case directory, where the file does not exist: every such check ended
`error` after the build had paid for its runs; then (commit 2487af18) `claw validate` refused the config instead. Now
the sandbox also has the hook file's folder (read-only, as an `import_path` hook's folder), and what a hook may import
there is an input of the checks, by the rule of `import_path` hooks (evaluate/inputs.py, `_import_folder`).

The `path` runner does not put the hook's folder on `sys.path` (hook_runner.py loads the file by
`spec_from_file_location`, under `python -I`): a hook importing a module beside it puts its own folder there first, as
this one does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import EV, JUDGE, Layers, Rebuild, eval_profile, judge_reply, judged_once
from tests.support.stamps import wait_out_racy_window
from tests.support.workspace import Workspace

CASES = ("alpha", "beta")

SHARED = {
    "check.py": (
        "import os, sys\n"
        "sys.path.insert(0, os.path.dirname(__file__))\n"
        "from helper import WORD\n"
        "def check(artifact):\n"
        "    return {'passed': True, 'message': 'shared says ' + WORD}\n"),
    "helper.py": "WORD = 'four'\n",
    "README.md": "Checks shared by the cases.\n",
}
ALL = {f"{case}/{model}" for case in CASES for model in ("m1", "m2")}
RECHECKED: Layers = {"checks": ALL, "judge": ALL, "result": ALL}


def _campaign(ws: Workspace) -> None:
    for name, text in SHARED.items():
        (ws.configs / "shared").mkdir(exist_ok=True)
        (ws.configs / "shared" / name).write_text(text)
    for case in CASES:
        ws.edit(f"cases/{case}/test.yaml", lambda d: d.update(deterministic_checks=[
            {"check_id": "hook", "python_hook": {"path": "../../shared/check.py", "callable_name": "check"}}]))
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandIn, Path]]:
    with judged_once(tmp_path_factory, "hook-path-shared", _campaign) as made:
        yield made


@pytest.fixture
def rebuild(built: tuple[StandIn, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Rebuild:
    return Rebuild.of(built, tmp_path, monkeypatch)


def test_the_shared_hook_runs_for_both_cases(built: tuple[StandIn, Path]) -> None:
    _, root = built
    messages = set()
    for key, _ in Store(root / "store").iter_actions():
        record = Store(root / "store").get_action(key)
        if record.kind == "checks":
            assert [(c["outcome"], c["message"]) for c in record.summary["checks"]] == [("passed", "shared says four")]
            messages.add(key)
    assert len(messages) == 4  # two cases × two models


def _rewrite(name: str, change: Callable[[str], str]) -> Callable[[Workspace], None]:
    def edit(ws: Workspace) -> None:
        path = ws.configs / "shared" / name
        path.write_text(change(path.read_text()))
    return edit


# (what changes, the edit, the layers that execute, judge requests, the hook's message after)
ROWS: list[tuple[str, Callable[[Workspace], None], Layers, int, str]] = [
    ("module beside it", _rewrite("helper.py", lambda t: "WORD = 'five'\n"), RECHECKED, 4, "shared says five"),
    ("module beside it, same result", _rewrite("helper.py", lambda t: "# a comment\n" + t), RECHECKED, 0,
     "shared says four"),
    ("the hook", _rewrite("check.py", lambda t: t.replace("'shared says '", "'the hook says '")), RECHECKED, 4,
     "the hook says four"),
    ("no module", _rewrite("README.md", lambda t: t + "More.\n"), {}, 0, "shared says four"),
]


@pytest.mark.parametrize(("edit", "executes", "judged", "message"), [row[1:] for row in ROWS],
                         ids=[row[0] for row in ROWS])
def test_an_edit_of_the_shared_hook_runs_the_checks_of_both_cases_again(
        rebuild: Rebuild, edit: Callable[[Workspace], None], executes: Layers, judged: int, message: str) -> None:
    edit(rebuild.ws)
    assert rebuild.stale().get("checks", 0) == len(executes.get("checks", ()))
    assert rebuild.executes() == executes
    assert rebuild.build() == (0, judged)  # no model asked again, the judge only when the checks' results differ
    assert rebuild.executes() == {}
    assert message in rebuild.check_messages("hook")


def test_an_edit_beside_a_hook_above_the_case_folders_is_seen_by_the_read_commands(
        ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """A hook in the folder that holds the case folders (`path: ../check.py`, in `configs/cases/`) importing a module
    beside it: an edit of that module lies below `configs/cases/` in no case's directory, so `claw status` and
    `build --dry-run` plan the cases its stamp cannot answer for (builder/casestamp.py): those whose hook's folder holds
    it. Before, none was (its name is in no case's test.yaml): every check fresh, and the build then ran them all."""
    cases = ws.configs / "cases"
    (cases / "check.py").write_text(SHARED["check.py"])
    (cases / "helper.py").write_text(SHARED["helper.py"])
    for case in CASES:
        ws.edit(f"cases/{case}/test.yaml", lambda d: d.update(deterministic_checks=[
            {"check_id": "hook", "python_hook": {"path": "../check.py", "callable_name": "check"}}]))
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})
    standin.script(JUDGE, judge_reply(7))
    assert claw.build(*EV)[0] == 0
    wait_out_racy_window(ws.root)
    assert claw.build(*EV)[0] == 0  # (leaves the stamp)
    (cases / "helper.py").write_text("WORD = 'five'\n")
    code, out, err = claw("status", "--suite", "main", "--run-profile", "rp", *EV, "--output", "json")
    assert code == 0, out + err
    assert {model: counts["layers"]["checks"]["stale"] for model, counts in json.loads(out)["models"].items()} == {
        "m1": 2, "m2": 2}
    code, out, err = claw.build(*EV, "--dry-run")
    assert code == 0, out + err
    assert "12 node(s) would execute (4 checks, 4 judgements, 4 results)" in out, out
