"""A workspace moved or cloned to another directory keeps its keys: nothing is checked or judged again.

A case's file checks name paths relative to its directory; where that directory sits on the host must
enter neither the checks' key nor their results (which the judge is shown, so they are in its key too).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

FILE_CHECKS = [
    {"check_id": "absent", "dimensions": ["closeness"],
     "declarative": {"kind": "file_exists", "path": "never_created.txt"}},
    {"check_id": "notes", "dimensions": ["task"],
     "declarative": {"kind": "file_contains", "path": "./data/../notes.txt", "text": "hello"}},
    {"check_id": "data", "dimensions": ["process"], "declarative": {"kind": "path_exists", "path": "data"}},
]


def build(claw: Claw) -> list[dict[str, object]]:
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json")
    assert code == 0, err
    return json.loads(out)["rows"]


def test_a_moved_workspace_rebuilds_nothing_its_file_checks_included(
        ws: Workspace, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=FILE_CHECKS))
    (ws.configs / "cases" / "alpha" / "notes.txt").write_text("hello world\n")
    (ws.configs / "cases" / "alpha" / "data").mkdir()
    assert {row["eval"] for row in build(Claw(ws.root))} == {"exec"}
    paid = len(standin.requests)

    moved = tmp_path / "elsewhere" / "deeper" / "clone"
    moved.parent.mkdir(parents=True)
    shutil.move(ws.root, moved)
    monkeypatch.chdir(moved)
    rows = build(Claw(moved))
    assert len(standin.requests) == paid, "the moved workspace paid again"
    assert {(row["run"], row["eval"]) for row in rows} == {("reuse", "reuse")}

    store = Store(tmp_path / "store")
    # The results name each path as the case wrote it, and hold no host directory.
    for oid in store.iter_objects():
        assert str(tmp_path).encode() not in store.get_bytes(oid), oid
