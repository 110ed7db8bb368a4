"""A result node reads its checks and judgements from the bytes this build kept (builder/eval_layer.py `_put_kept`),
not back from the store: the same records either way, and nothing kept once a window concludes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder.eval_layer import EvalLayer
from clawstore.store import Store
from clawstore.store.core.objects import ObjectStore
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import JUDGE, build, eval_profile, judge_reply
from tests.support.workspace import Workspace


@pytest.fixture
def scored(ws: Workspace, standin: StandIn) -> Workspace:
    eval_profile(ws, repetitions=2)
    standin.script(JUDGE, judge_reply(7))  # one answer: judgements in any order give the same results
    return ws


def _results(store: Store) -> dict[tuple[str, str], dict[str, Any]]:
    """Each result record's outputs and summary by its run's address (times and build ids left out)."""
    found = {}
    for key, _ in store.iter_actions():
        record = store.get_action(key)
        if record.kind == "result":
            found[(record.address["model_id"], record.address["case_id"])] = {
                "key": key, "outputs": record.outputs, "summary": record.summary, "status": record.status}
    return found


def test_results_read_nothing_back_and_match_the_store_path(scored: Workspace, claw: Claw,
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    read: list[str] = []  # what a result node read from the store
    in_result: list[bool] = []
    original_get, original_result = ObjectStore.get_json, EvalLayer._exec_result

    def counting_get(self: ObjectStore, oid: str) -> Any:
        if in_result:
            read.append(oid)
        return original_get(self, oid)

    def result(self: EvalLayer, node: Any, build_id: str) -> Any:
        in_result.append(True)
        try:
            return original_result(self, node, build_id)
        finally:
            in_result.pop()

    monkeypatch.setattr(ObjectStore, "get_json", counting_get)
    monkeypatch.setattr(EvalLayer, "_exec_result", result)
    assert build(claw)[0] == 0
    kept = _results(Store(Path(os.environ["CLAW_STORE"])))
    assert len(kept) == 4
    store = Store(Path(os.environ["CLAW_STORE"]))
    inputs = set()
    for found in kept.values():
        document = store.get_json(found["outputs"]["input_document"])
        inputs |= {document["checks"], *document["judgements"]}
    assert inputs and not read  # neither the checks nor a judgement read back for a result

    # The same build with nothing kept (every input read from the store): the same records, id for id.
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store-read"))
    monkeypatch.setattr(EvalLayer, "_put_kept", lambda self, node, value: self.store.put_json(value))
    read.clear()
    assert build(claw)[0] == 0
    assert set(read) == inputs
    assert _results(Store(tmp_path / "store-read")) == kept


def test_nothing_kept_once_the_results_are_made(scored: Workspace, claw: Claw, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    original = EvalLayer.conclude

    def conclude(self: EvalLayer, session: Any, evaluations: list[Any]) -> list[Any]:
        kept_before = [n.made for ev in evaluations for n in (ev.checks, *ev.judges) if n is not None]
        done = original(self, session, evaluations)
        seen.append((kept_before, [n.made for ev in done for n in ev.nodes()]))
        return done

    monkeypatch.setattr(EvalLayer, "conclude", conclude)
    assert build(claw)[0] == 0
    assert seen and all(any(before) for before, _ in seen)  # the checks and judgements kept their bytes ...
    assert all(m is None for _, after in seen for m in after)  # ... and hold none once their window concluded


def test_a_judge_request_takes_its_checks_from_the_kept_bytes(scored: Workspace, claw: Claw,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []  # what judge_request read from the store
    asked: list[Any] = []  # the checks object each judge request was made with
    in_request: list[bool] = []
    original_get, original_request = ObjectStore.get_json, EvalLayer.judge_request

    def counting_get(self: ObjectStore, oid: str) -> Any:
        if in_request:
            read.append(oid)
        return original_get(self, oid)

    def request(self: EvalLayer, node: Any) -> Any:
        in_request.append(True)
        try:
            asked.append(node.document["checks"])
            return original_request(self, node)
        finally:
            in_request.pop()

    monkeypatch.setattr(ObjectStore, "get_json", counting_get)
    monkeypatch.setattr(EvalLayer, "judge_request", request)
    assert build(claw)[0] == 0
    assert len(asked) == 8  # 4 runs, 2 judgements each
    assert read and not set(read) & set(asked)  # the runs' artifacts read, the checks never
