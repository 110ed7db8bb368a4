"""A result node reads its checks and judgements from the bytes this build kept (builder/eval_layer.py `_put_kept`),
and the checks and judge requests read their run's artifact from the bytes its run node kept (builder/run_exec.py
`record_run`), not back from the store: the same records either way, and nothing kept once a window concludes."""

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


def _reads_within(monkeypatch: pytest.MonkeyPatch, method: str) -> list[str]:
    """The ids `ObjectStore.get_json` is asked for while `EvalLayer.<method>` runs (filled as the build goes)."""
    read: list[str] = []
    inside: list[bool] = []
    original_get, original = ObjectStore.get_json, getattr(EvalLayer, method)

    def counting_get(self: ObjectStore, oid: str) -> Any:
        if inside:
            read.append(oid)
        return original_get(self, oid)

    def within(self: EvalLayer, *args: Any) -> Any:
        inside.append(True)
        try:
            return original(self, *args)
        finally:
            inside.pop()

    monkeypatch.setattr(ObjectStore, "get_json", counting_get)
    monkeypatch.setattr(EvalLayer, method, within)
    return read


def test_results_read_nothing_back_and_match_the_store_path(scored: Workspace, claw: Claw,
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    read = _reads_within(monkeypatch, "_exec_result")  # what a result node read from the store
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
        kept_before = [n.made for ev in evaluations for n in (ev.run, ev.checks, *ev.judges) if n is not None]
        done = original(self, session, evaluations)
        seen.append((kept_before, [n.made for ev in done for n in (ev.run, *ev.nodes())]))
        return done

    monkeypatch.setattr(EvalLayer, "conclude", conclude)
    assert build(claw)[0] == 0
    assert seen and all(any(before) for before, _ in seen)  # the runs, checks and judgements kept bytes ...
    assert all(m is None for _, after in seen for m in after)  # ... and hold none once their window concluded


def test_a_judge_request_takes_its_checks_from_the_kept_bytes(scored: Workspace, claw: Claw,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    read = _reads_within(monkeypatch, "judge_request")  # what judge_request read from the store
    asked: list[Any] = []  # the checks object each judge request was made with
    original_request = EvalLayer.judge_request

    def request(self: EvalLayer, node: Any) -> Any:
        asked.append(node.document["checks"])
        return original_request(self, node)

    monkeypatch.setattr(EvalLayer, "judge_request", request)
    assert build(claw)[0] == 0
    assert len(asked) == 8  # 4 runs, 2 judgements each
    assert not read  # neither the checks nor the run's artifact read back


def _artifacts(store: Store) -> set[str]:
    return {store.get_action(key).outputs["artifact"] for key, _ in store.iter_actions()
            if store.get_action(key).kind == "run"}


def test_the_checks_read_no_artifact_back_and_match_the_store_path(scored: Workspace, claw: Claw,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    read = _reads_within(monkeypatch, "_exec_checks")  # what a checks node read from the store
    assert build(claw)[0] == 0
    store = Store(Path(os.environ["CLAW_STORE"]))
    assert len(_artifacts(store)) == 4 and not read  # four runs' artifacts, none read back by their checks
    kept = _results(store)

    # The same build with no artifact kept (each read from the store): every artifact read, the same results.
    from clawstore.builder import api
    from clawstore.builder.run_exec import LlmProbeRuns

    monkeypatch.setattr(api, "LlmProbeRuns", lambda store, client, keep_artifacts: LlmProbeRuns(store, client))
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store-read"))
    assert build(claw)[0] == 0
    assert set(read) == _artifacts(Store(tmp_path / "store-read"))
    assert _results(Store(tmp_path / "store-read")) == kept


def test_an_artifact_over_the_cap_is_read_back(scored: Workspace, claw: Claw, monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.builder import run_exec

    monkeypatch.setattr(run_exec, "KEEP_ARTIFACT_MAX", 100)  # every artifact of this campaign is longer
    read = _reads_within(monkeypatch, "_exec_checks")
    assert build(claw)[0] == 0
    assert set(read) == _artifacts(Store(Path(os.environ["CLAW_STORE"])))  # none kept: each read from the store


def test_a_build_without_evaluation_keeps_no_artifact(ws: Workspace, claw: Claw,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.builder import run_exec

    runs: list[Any] = []
    original = run_exec.record_run

    def record_run(store: Store, node: Any, *args: Any) -> Any:
        runs.append(node)
        return original(store, node, *args)

    monkeypatch.setattr(run_exec, "record_run", record_run)
    assert claw.build()[0] == 0
    assert runs and all(node.made is None for node in runs)


def test_a_run_drops_its_artifact_once_its_last_judgement_has_its_request(scored: Workspace, claw: Claw,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    read = _reads_within(monkeypatch, "judge_request")
    kept_after: dict[int, list[bool]] = {}  # per run: after each of its judge requests, are its bytes still kept?
    one_at_a_time = threading.Lock()  # (a run's two judgements may ask at once: their order made plain)
    original = EvalLayer.judge_request

    def request(self: EvalLayer, node: Any) -> Any:
        with one_at_a_time:
            body = original(self, node)
            kept_after.setdefault(id(node.run), []).append(node.run.made is not None)
        return body

    monkeypatch.setattr(EvalLayer, "judge_request", request)
    assert build(claw)[0] == 0
    assert sorted(kept_after.values()) == [[True, False]] * 4  # kept for the second judgement, dropped after it
    assert not read  # neither judgement read the artifact back


def test_a_run_whose_judgements_go_by_provider_batch_drops_its_artifact_after_its_checks(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    eval_profile(ws, repetitions=2, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                                             "batch": True}])  # the runs here, their judgements by batch
    standin.script(JUDGE, judge_reply(7))
    standin.batch_settings(delay=60)  # (the build ends with them pending)
    kept: list[tuple[bool, bool]] = []  # per run: kept before its window's checks, kept after them
    original = EvalLayer.prepare

    def prepare(self: EvalLayer, session: Any, runs: list[Any]) -> Any:
        before = [run.made is not None for run in runs]
        done = original(self, session, runs)
        kept.extend(zip(before, [run.made is not None for run in runs], strict=True))
        return done

    monkeypatch.setattr(EvalLayer, "prepare", prepare)
    build(claw)
    assert standin.batch_stats()["lines"] == 8  # 4 runs, 2 judgements each, none sent here
    assert kept == [(True, False)] * 4  # kept for the checks, dropped at once: no judgement here reads it
