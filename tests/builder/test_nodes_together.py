"""The checks and results a build runs in its own thread share a store batch, up to GROUP_NODES of them
(builder/together.py): a write to the pack a group, not a node; each node reported only once its record is written; a
node that fails leaves no entry behind, and a store failure keeps nothing of its group."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import eval_layer, together
from clawstore.builder.buildlog import BuildLog
from clawstore.builder.eval_layer import EvalLayer
from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.core import objects
from clawstore.store.core.objects import ObjectStore
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import JUDGE, build, eval_profile, judge_reply
from tests.support.workspace import Workspace

CASES = 40  # × 2 models: 80 checks and 80 results, each layer more than two groups


@pytest.fixture
def judged(ws: Workspace, standin: StandIn) -> Workspace:
    for index in range(CASES - 2):  # (the standard workspace has two)
        ws.case(f"c{index:03d}", f"Question {index}?")
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(7))
    return ws


def _in_layers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kind of layer the build's own thread is running (`EvalLayer._layer`'s label), while it runs."""
    inside: list[str] = []
    original = EvalLayer._layer

    def layer(self: EvalLayer, session: Any, nodes: list[Any], work: Any, label: str, **kwargs: Any) -> None:
        inside.append(label)
        try:
            original(self, session, nodes, work, label, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(EvalLayer, "_layer", layer)
    return inside


def _entries(store: Store, kind: str) -> dict[str, str]:
    """{case id/model id: key} of the store's records of `kind`."""
    found = {}
    for key, _ in store.iter_actions():
        record = store.get_action(key)
        if record.kind == kind:
            found[f"{record.address['case_id']}/{record.address['model_id']}"] = key
    return found


def test_a_layer_of_local_nodes_is_written_a_group_at_a_time(judged: Workspace, claw: Claw,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    inside = _in_layers(monkeypatch)
    writes: dict[str, int] = {"checks": 0, "results": 0}
    original = ObjectStore._write_queued
    main = threading.main_thread()

    def counted(self: ObjectStore, batch: Any, entries: bool = False) -> None:
        if inside and threading.current_thread() is main and batch.queued:
            writes[inside[-1]] += 1
        original(self, batch, entries)

    monkeypatch.setattr(ObjectStore, "_write_queued", counted)
    code, report = build(claw)
    assert code == 0 and len(report["rows"]) == 2 * CASES
    groups = -(-2 * CASES // together.GROUP_NODES)  # 80 nodes a layer: 3 groups (one write each; 80 on main)
    assert writes == {"checks": groups, "results": groups}
    store = Store(Path(os.environ["CLAW_STORE"]))
    assert len(_entries(store, "checks")) == len(_entries(store, "result")) == 2 * CASES


def test_each_local_node_is_reported_only_once_its_record_is_written(judged: Workspace, claw: Claw,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    reported: list[str] = []
    original = BuildLog.add

    def add(self: BuildLog, kind: str, key: str, record_id: str | None, action: str, *args: Any, **kw: Any) -> None:
        if kind in ("checks", "result") and action == "exec":
            assert self.store.runtime.batch() is None  # nothing this thread put waits to be written
            assert self.store.locate(record_id)  # the record is in a pack (a kill now cannot lose it)
            reported.append(key)
        original(self, kind, key, record_id, action, *args, **kw)

    monkeypatch.setattr(BuildLog, "add", add)
    assert build(claw)[0] == 0
    assert len(reported) == 4 * CASES


def test_a_local_node_that_fails_after_its_entry_leaves_none_and_the_group_goes_on(
        judged: Workspace, claw: Claw, monkeypatch: pytest.MonkeyPatch) -> None:
    original = eval_layer.record_under_legacy_key

    def failing(store: Store, node: Any, record: dict[str, Any]) -> None:  # (called after the node's entry is put)
        if node.kind == "checks" and node.address["case_id"] == "c010" and node.address["model_id"] == "m1":
            raise RuntimeError("the checks failed after their entry")
        original(store, node, record)

    monkeypatch.setattr(eval_layer, "record_under_legacy_key", failing)
    code, report = build(claw)
    assert code == 1
    failed = [r for r in report["rows"] if r["eval"] == "fail"]
    assert [(r["case_id"], r["model_id"]) for r in failed] == [("c010", "m1")]
    store = Store(Path(os.environ["CLAW_STORE"]))
    checks = _entries(store, "checks")
    assert "c010/m1" not in checks and len(checks) == 2 * CASES - 1  # the others of its group recorded


def test_a_store_failure_in_a_group_keeps_nothing_of_it_and_reports_nothing_unwritten(
        judged: Workspace, claw: Claw, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objects, "QUEUE_MAX_OBJECTS", 2)  # the group's queue written as it goes: lost with the failure
    original = EvalLayer._put_kept
    reported: dict[str, str] = {}
    add = BuildLog.add

    def put_kept(self: EvalLayer, node: Any, value: Any) -> str:
        if node.kind == "checks" and node.address["case_id"] == "c020" and node.address["model_id"] == "m2":
            raise StoreError("cannot write to store: No space left on device")
        return original(self, node, value)

    def noted(self: BuildLog, kind: str, key: str, record_id: str | None, action: str, *args: Any, **kw: Any) -> None:
        if kind == "checks":
            reported[key] = action
        add(self, kind, key, record_id, action, *args, **kw)

    monkeypatch.setattr(EvalLayer, "_put_kept", put_kept)
    monkeypatch.setattr(BuildLog, "add", noted)
    code, _, err = claw.build("--evaluation-profile", "ev")
    assert code != 0 and "No space left on device" in err
    store = Store(Path(os.environ["CLAW_STORE"]))
    stored = set(_entries(store, "checks").values())
    assert {key for key, action in reported.items() if action == "exec"} == stored  # reported done: stored
    assert stored and len(stored) % together.GROUP_NODES == 0  # whole groups, the failed one's none
    assert "fail" in reported.values()
