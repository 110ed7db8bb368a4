"""`claw archive import A --configs-to DIR` gives a workspace whose `claw build` sends zero requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.faults.test_hostile_archives import snapshot
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


@pytest.fixture
def archive(ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> Path:
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(8))
    assert claw("build", *CAMPAIGN)[0] == 0
    path = tmp_path / "campaign.claw"
    code, _, err = claw("archive", "export", *CAMPAIGN, "-o", str(path))
    assert code == 0, err
    return path


@pytest.mark.parametrize("fresh", ["absent", "empty", "only its store"])
def test_configs_to_a_fresh_workspace_then_build_there_sends_zero_requests(
        archive: Path, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        fresh: str) -> None:
    monkeypatch.delenv("CLAW_STORE")  # the default store: DIR/store, where `claw build` in DIR looks
    target = tmp_path / "elsewhere"
    if fresh != "absent":
        target.mkdir()
    if fresh == "only its store":
        Store(target / "store")
    monkeypatch.chdir(tmp_path)
    code, out, err = claw("archive", "import", str(archive), "--configs-to", str(target))
    assert code == 0, out + err
    assert f"into {target / 'store'}" in out and (target / "configs" / "suites" / "main.yaml").is_file()
    assert sorted(p.name for p in target.iterdir()) == ["configs", "store"]

    monkeypatch.chdir(target)
    requests = len(standin.requests)
    code, out, err = claw("build", *CAMPAIGN, "--output", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["counts"]["executed"] == 0 and report["counts"]["reused"] > 0
    assert len(standin.requests) == requests  # zero requests, runs and judge alike


def test_configs_to_checks_every_precondition_before_writing(
        archive: Path, claw: Claw, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_STORE")
    monkeypatch.chdir(tmp_path)
    used = tmp_path / "used"
    (used / "configs").mkdir(parents=True)
    (used / "configs" / "mine.yaml").write_text("mine: true\n")
    not_a_store = tmp_path / "odd"
    (not_a_store / "store").mkdir(parents=True)
    (not_a_store / "store" / "notes.txt").write_text("not a store\n")
    for directory, words in ((used, "not empty (holds configs)"), (not_a_store, "is not a claw store")):
        before = snapshot(directory)
        code, out, err = claw("archive", "import", str(archive), "--configs-to", str(directory))
        assert code == 2 and words in err and err.count("\n") == 1, out + err
        assert snapshot(directory) == before
    other_store = tmp_path / "s"
    code, out, err = claw("archive", "import", str(archive), "--configs-to", str(used), "--store", str(other_store))
    assert code == 2 and not other_store.exists(), err  # the configs target is checked first
