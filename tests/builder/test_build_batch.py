"""`claw build --batch`: judgements through the stand-in's OpenAI Batch API, collected after any restart."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import batch_doc
from clawstore.builder.batch_doc import BatchDoc
from clawstore.store import RecordDoc, Store
from clawstore.store.core.ids import oid_hex
from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import run_claw
from tests.support.claw import Claw
from tests.support.judging import JUDGE, build, eval_profile, judge_reply, judge_requests
from tests.support.reaped import Reap
from tests.support.workspace import Workspace


def store() -> Store:
    return Store(Path(os.environ["CLAW_STORE"]))


def judge_records(s: Store) -> dict[str, RecordDoc]:
    found = {}
    for key, _ in s.iter_actions():
        record = s.get_action(key)
        if record and record.kind == "judge":
            found[key] = record
    return found


@pytest.fixture
def scored(ws: Workspace, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """4 runs built one by one (2 models x 2 cases); their 12 judgements not yet made."""
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    assert Claw(ws.root).build()[0] == 0
    return ws


def test_judgements_go_in_one_batch_and_the_next_build_collects_them(scored: Workspace, claw: Claw,
                                                                     standin: StandIn) -> None:
    standin.batch_settings(delay=60)
    code, report = build(claw, "--batch")
    assert code == 0, report
    assert judge_requests(standin) == 0  # not one judgement sent one by one
    stats = standin.batch_stats()
    assert stats["batches"] == 1 and stats["lines"] == 12 and len(set(stats["custom_ids"])) == 12
    assert {r["eval"] for r in report["rows"]} == {"pending"} and report["pending_in_batches"] == 12
    [doc] = batch_doc.pending(store())
    assert doc.batch_id and doc.status == "in_progress" and len(doc.covered) == 12
    standin.batch_settings(delay=0)  # it finishes
    code, report = build(claw)  # without --batch: what a batch stands for is collected, not sent again
    assert code == 0, report
    assert {r["eval"] for r in report["rows"]} == {"exec"} and {r["score"] for r in report["rows"]} == {7.0}
    assert judge_requests(standin) == 0 and standin.batch_stats()["lines"] == 12
    assert batch_doc.pending(store()) == []
    records = judge_records(store())
    assert len(records) == 12 and {r.summary["batch"]["cost_source"] for r in records.values()} == {"reported"}
    code, report = build(claw, "--batch")
    assert {r["eval"] for r in report["rows"]} == {"reuse"} and standin.batch_stats()["batches"] == 1


def test_batch_status_collects_and_lists(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    args = ("batch", "status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    code, out, _ = claw(*args, "--output", "json")
    assert code == 1 and json.loads(out)["pending"] == 12
    standin.batch_settings(delay=0.3)  # it finishes while `--wait` polls
    code, out, _ = claw(*args, "--wait", "--output", "json")
    spent = sum(r.metrics.cost_usd or 0 for r in judge_records(store()).values())
    assert spent > 0 and code == 0 and json.loads(out) == {
        "batches": [], "campaign": json.loads(out)["campaign"], "pending": 0, "recorded": 12, "stopped": None,
        "cost_usd": pytest.approx(spent), "cost_known_usd": pytest.approx(spent)}
    code, report = build(claw)
    assert {r["eval"] for r in report["rows"]} == {"exec"}  # the records are there: only results were left
    assert judge_requests(standin) == 0


def test_batch_status_says_what_the_lines_it_records_cost(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    """The lines `claw batch status` records were paid for, and the next build reuses them (its `cost spent` is 0):
    before session 77 it said "12 line(s) recorded now" and no command ever said what they cost."""
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    standin.batch_settings(delay=0)
    code, out, _ = claw("batch", "status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    spent = sum(r.metrics.cost_usd or 0 for r in judge_records(store()).values())
    assert code == 0 and spent > 0 and f"12 line(s) recorded now, cost spent {spent:.6f} USD;" in out, out


def test_scores_and_judgements_are_byte_identical_to_the_synchronous_path(scored: Workspace, claw: Claw,
                                                                          standin: StandIn,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    assert build(claw)[0] == 0
    sync = judge_records(store())
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "batched"))  # runs and judgements by batch
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["eval"] for r in report["rows"]} == {"exec"}
    batched = by_address(judge_records(store()))
    sync = by_address(sync)
    assert sync.keys() == batched.keys() and len(sync) == 12
    for address, record in sync.items():
        assert batched[address].outputs["judgement"] == record.outputs["judgement"]  # the same bytes
        assert batched[address].summary["overall_score"] == record.summary["overall_score"]


def by_address(records: dict[str, RecordDoc]) -> dict[str, RecordDoc]:
    return {json.dumps(r.address, sort_keys=True): r for r in records.values()}


def test_an_expired_batch_s_lines_are_sent_again_once(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    standin.batch_settings(expire_next=1, expire_keep=5)
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["eval"] for r in report["rows"]} == {"exec"}
    stats = standin.batch_stats()
    assert stats["batches"] == 2 and stats["lines"] == 12 + 7
    counts = {cid: stats["custom_ids"].count(cid) for cid in stats["custom_ids"]}
    assert sorted(counts.values()) == [1] * 5 + [2] * 7
    assert judge_requests(standin) == 0 and batch_doc.pending(store()) == []


def test_failed_lines_are_sent_again_and_a_cancel_releases_the_nodes(scored: Workspace, claw: Claw,
                                                                     standin: StandIn) -> None:
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    code, out, _ = claw("batch", "cancel", "--all", "--output", "json")
    assert code == 0 and json.loads(out)["cancelled"] == 1
    assert standin.batch_stats()["cancelled"] == 1 and batch_doc.pending(store()) == []
    standin.batch_settings(delay=0)
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["score"] for r in report["rows"]} == {7.0}
    assert standin.batch_stats()["lines"] == 24 and judge_requests(standin) == 0


def test_priced_cost_applies_the_batch_factor_when_the_provider_reports_none(ws: Workspace, claw: Claw,
                                                                             standin: StandIn,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    eval_profile(ws, repetitions=1, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                                             "batch": True,
                                             "pricing": {"input": 2.0, "output": 8.0, "batch": 0.5}}])
    reply = judge_reply(6)
    reply["usage"] = {"cost": None}
    standin.script(JUDGE, reply)
    code, report = build(claw, "--wait")  # the judge's `batch: true`: no flag needed
    assert code == 0, report
    records = judge_records(store()).values()
    assert records and standin.batch_stats()["lines"] == len(records) and judge_requests(standin) == 0
    for record in records:
        metrics = record.metrics
        expected = (metrics.input_tokens * 2.0 + metrics.output_tokens * 8.0) / 1e6 * 0.5
        assert metrics.cost_usd == pytest.approx(expected)
        assert record.summary["batch"]["cost_source"] == metrics.cost_source == "priced"  # not "reported"


def test_a_batch_line_is_priced_by_a_judge_s_cost_as_by_its_pricing(ws: Workspace, claw: Claw, standin: StandIn,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # `cost`, OpenClaw's name for `pricing`: the batch path read `pricing` only, and its summary said "unknown"
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    eval_profile(ws, repetitions=1, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                                             "batch": True, "cost": {"input": 2.0, "output": 8.0}}])
    reply = judge_reply(6)
    reply["usage"] = {"cost": None}
    standin.script(JUDGE, reply)
    code, report = build(claw, "--wait")
    assert code == 0, report
    records = judge_records(store()).values()
    # (each judgement is recorded under its key and, its judge declaring `cost`, the key the claw before gave it too:
    # docs/building.md, Keys)
    addresses = {tuple(sorted(record.address.items())) for record in records}
    assert records and standin.batch_stats()["lines"] == len(addresses) == len(records) / 2
    for record in records:
        metrics = record.metrics
        assert metrics.cost_usd == pytest.approx((metrics.input_tokens * 2.0 + metrics.output_tokens * 8.0) / 1e6)
        assert record.summary["batch"]["cost_source"] == metrics.cost_source == "priced"


@pytest.mark.parametrize("usage", [
    {"cost": "0.5"},  # tokens the stand-in counts, a cost no provider sends: none of it believed
    {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None, "cost": None},  # no counts: not 0
], ids=["bounds", "no_counts"])
def test_a_batch_line_whose_usage_breaks_the_bounds_is_kept_and_not_priced(ws: Workspace, claw: Claw,
                                                                          standin: StandIn,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          usage: dict[str, Any]) -> None:
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    eval_profile(ws, repetitions=1, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                                             "batch": True, "pricing": {"input": 2.0, "output": 8.0}}])
    reply = judge_reply(6)
    reply["usage"] = usage
    standin.script(JUDGE, reply)
    code, report = build(claw, "--wait")
    assert code == 0, report
    records = judge_records(store()).values()
    assert records and standin.batch_stats()["lines"] == len(records) and judge_requests(standin) == 0
    for record in records:
        metrics = record.metrics
        assert record.status == "success" and record.summary["overall_score"] == 6
        assert (metrics.cost_usd, metrics.cost_source, metrics.input_tokens, metrics.output_tokens) == (
            None, "unknown", None, None)
        assert record.summary["batch"]["cost_source"] == "unknown"  # not priced from tokens nobody believed


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "one_by_one"])
def test_a_judge_reply_reporting_a_cost_but_no_counts_has_unknown_tokens_and_its_cost(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, batch: bool) -> None:
    # OpenRouter-style `usage: {cost}` without counts: before, the judgement counted 0 tokens (its cost was kept)
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    eval_profile(ws, repetitions=1, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                                             "batch": batch, "pricing": {"input": 2.0, "output": 8.0}}])
    reply = judge_reply(6)
    reply["usage"] = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None, "cost": 0.125}
    standin.script(JUDGE, reply)
    code, report = build(claw, "--wait")
    assert code == 0, report
    records = judge_records(store()).values()
    assert len(records) == 4 and judge_requests(standin) == (0 if batch else 4)
    for record in records:
        metrics = record.metrics
        assert (metrics.input_tokens, metrics.output_tokens, metrics.cost_usd, metrics.cost_source) == (
            None, None, 0.125, "reported"), metrics
    code, out, err = claw("query", "select input_tokens, output_tokens, cost_usd from judgements", "--format", "json")
    assert code == 0 and json.loads(out) == [{"input_tokens": None, "output_tokens": None, "cost_usd": 0.125}] * 4, err
    assert report["metrics"]["input_tokens"] is None and report["metrics"]["tokens_unknown"] == 4, report["metrics"]


def test_two_concurrent_builds_submit_each_judgement_once(scored: Workspace, claw: Claw, standin: StandIn,
                                                          reap: Reap) -> None:
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0  # the runs first (their judgements in a batch, cancelled)
    assert claw("batch", "cancel", "--all")[0] == 0
    base = standin.batch_stats()["lines"]
    standin.batch_settings(delay=0.3)
    args = ("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev", "--batch", "--wait",
            "--output", "json")
    first, second = reap(claw.popen(*args)), reap(claw.popen(*args))
    outs = [p.communicate(timeout=120) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs
    assert standin.batch_stats()["lines"] == base + 12 and judge_requests(standin) == 0
    assert len(judge_records(store())) == 12


def test_a_sigkill_at_any_instant_after_submission_loses_and_resends_nothing(scored: Workspace, claw: Claw,
                                                                              standin: StandIn) -> None:
    from clawstore.store.services.fsck import fsck

    args = ("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev", "--batch", "--wait")
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0  # the runs, and a batch of 12 lines, cancelled
    assert claw("batch", "cancel", "--all")[0] == 0
    standin.reset()  # counts from here
    standin.script(JUDGE, judge_reply(7))
    standin.batch_settings(delay=0.3)
    rng = random.Random(55)
    proc = claw.popen(*args)
    deadline = time.monotonic() + 30
    while standin.batch_stats()["batches"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.6))  # somewhere between submission and collection
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["score"] for r in report["rows"]} == {7.0}
    stats = standin.batch_stats()
    assert stats["lines"] == 12 and len(set(stats["custom_ids"])) == 12  # nothing sent twice
    assert judge_requests(standin) == 0 and len(judge_records(store())) == 12
    report = fsck(store())
    assert report.clean, report.problems


@pytest.mark.parametrize("created", [False, True])
def test_a_build_killed_between_recording_a_batch_and_hearing_its_id_sends_it_once(
        scored: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, created: bool) -> None:
    from clawstore.providers.batch_api import BatchApi

    original = BatchApi.create

    def dies(self: BatchApi, input_file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        if created:  # the provider made it; the process died before the store heard its id
            original(self, input_file_id, metadata)
        raise KeyboardInterrupt

    monkeypatch.setattr(BatchApi, "create", dies)
    code, _, _ = claw.build("--evaluation-profile", "ev", "--batch")
    assert code == 130
    [doc] = batch_doc.pending(store())
    assert doc.batch_id is None and doc.input_file_id and len(doc.covered) == 12
    monkeypatch.setattr(BatchApi, "create", original)
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["score"] for r in report["rows"]} == {7.0}
    stats = standin.batch_stats()
    assert stats["batches"] == 1 and stats["files"] == 1 and stats["lines"] == 12
    assert batch_doc.pending(store()) == [] and judge_requests(standin) == 0


PRICED_JUDGE = {"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                "pricing": {"input": 2.0, "output": 8.0, "batch": 0.5}}


def test_plan_batch_shows_both_prices(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    eval_profile(ws, judges=[PRICED_JUDGE])
    assert claw.build()[0] == 0  # the runs: the plan counts the judgements only
    args = ("plan", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev", "--output", "json")
    code, out, _ = claw(*args, "--batch")
    assert code == 0, out
    plan = json.loads(out)
    [judges] = [line for line in plan["lines"] if line["kind"] == "judge"]
    assert judges["estimated_batch_cost_usd"] == pytest.approx(judges["estimated_cost_usd"] * 0.5)
    assert plan["estimated_one_by_one_cost_usd"] - plan["estimated_cost_usd"] == pytest.approx(
        judges["estimated_cost_usd"] * 0.5)
    code, out, _ = claw(*args[:-2], "--batch")
    assert "EST_BATCH_USD" in out and "USD one by one" in out
    plain = json.loads(claw(*args)[1])
    assert "batch" not in plain and plain["estimated_cost_usd"] == pytest.approx(plan["estimated_one_by_one_cost_usd"])


def test_max_cost_counts_batch_lines_when_submitted(ws: Workspace, claw: Claw, standin: StandIn,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.builder.api import CampaignRequest
    from clawstore.builder.api import build as api_build
    from clawstore.builder.engine import BuildOptions
    from clawstore.project.front import Project

    eval_profile(ws, judges=[PRICED_JUDGE])
    standin.script(JUDGE, judge_reply(7))
    standin.batch_settings(delay=60)
    assert claw.build()[0] == 0  # the runs, paid before
    request = CampaignRequest(ws.root, "main", "rp", "ev")
    said: list[str] = []
    report = api_build(request, Project(None, said.append, request),
                       BuildOptions(batch=True, max_cost_usd=0.02, progress="none"))
    [doc] = batch_doc.pending(store())
    assert 1 <= len(doc.keys) < 12 and doc.estimate_usd is not None and doc.estimate_usd <= 0.02
    assert report.counts["skipped"] == 12 - len(doc.keys) and "--max-cost" in (report.stopped or "")
    assert standin.batch_stats()["lines"] == len(doc.keys) and judge_requests(standin) == 0


def test_claw_status_collects_what_finished(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    args = ("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev", "--output", "json")
    code, out, err = claw(*args)
    assert code == 0 and "12 request(s) pending in provider batches" in err
    assert sum(m["layers"]["judge"]["never-built"] for m in json.loads(out)["models"].values()) == 12
    standin.batch_settings(delay=0)
    code, out, err = claw(*args)
    assert code == 0 and "pending" not in err
    assert sum(m["layers"]["judge"]["fresh"] for m in json.loads(out)["models"].values()) == 12
    spent = sum(r.metrics.cost_usd or 0 for r in judge_records(store()).values())  # (said, as batch status says it)
    assert f"claw: note: 12 finished batch line(s) recorded now, cost spent {spent:.6f} USD" in err, err
    assert batch_doc.pending(store()) == [] and judge_requests(standin) == 0


@pytest.mark.parametrize("collector", ["batch status", "status"])
def test_what_a_collect_recorded_outlives_a_gc_until_a_build(scored: Workspace, claw: Claw, standin: StandIn,
                                                            collector: str) -> None:
    """`claw batch status` (or `claw status`) records a finished batch's lines in the action cache outside a build,
    and the batch's ref goes: then no root named those records. Before session 77 a `claw gc --grace 0` (any gc past
    its grace period) before the next build deleted them with their entries, and the build paid for all 12
    judgements again."""
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    standin.batch_settings(delay=0)
    campaign = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    code, out, err = claw(*collector.split(), *campaign, "--output", "json")
    assert code == 0, err
    assert batch_doc.pending(store()) == [] and judge_requests(standin) == 0
    assert list(store().list_refs("collected/")) == ["collected/main__rp__ev"]
    gc = run_claw(scored.root, "gc", "--grace", "0")
    assert gc.code == 0, gc
    assert claw("fsck")[0] == 0  # (a read-back: in this process; the gcs stay real processes)
    code, report = build(claw)
    assert code == 0, report
    assert {r["score"] for r in report["rows"]} == {7.0}
    assert judge_requests(standin) == 0 and standin.batch_stats()["lines"] == 12
    assert store().list_refs("collected/") == {}  # (the build's head names them now: let go)
    assert run_claw(scored.root, "gc", "--grace", "0").code == 0
    assert build(claw)[0] == 0 and judge_requests(standin) == 0
    assert claw("fsck")[0] == 0


def test_retiring_a_campaign_lets_go_of_what_its_collects_recorded(scored: Workspace, claw: Claw,
                                                                    standin: StandIn) -> None:
    """No build of a retired campaign is coming to adopt them: `claw refs --delete` of its head lets them go."""
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    standin.batch_settings(delay=0)
    assert claw("batch", "status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")[0] == 0
    assert list(store().list_refs("collected/")) == ["collected/main__rp__ev"]
    code, _, err = claw("refs", "--delete", "campaigns/main__rp__ev")
    assert code == 0, err
    assert store().list_refs("collected/") == {}


def run_records(s: Store) -> dict[str, RecordDoc]:
    found = {}
    for key, _ in s.iter_actions():
        record = s.get_action(key)
        if record and record.kind == "run":
            found[json.dumps(record.address, sort_keys=True)] = record
    return found


def final_answer(s: Store, record: RecordDoc) -> Any:
    artifact = s.get_json(record.outputs["artifact"])
    return [e.get("content") for e in artifact["trace"] if e.get("role") == "assistant"], artifact["usage"]


def test_runs_without_tools_go_by_batch_one_file_per_model_and_match_the_synchronous_path(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    ws.case("tools", "Use the tools.", input={"messages": [{"role": "user", "content": "Use the tools."}],
                                              "context": {"llm_probe": {"tools": ["read_file"]}}})
    assert claw.build()[0] == 0
    sync = run_records(store())
    sent = len(standin.requests)
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "batched"))
    code, out, err = claw.build("--batch", "--output", "json")
    assert code == 0, err
    report = json.loads(out)
    assert {r["run"] for r in report["rows"] if r["case_id"] != "tools"} == {"pending"}
    assert {r["run"] for r in report["rows"] if r["case_id"] == "tools"} == {"exec"}  # a tool loop: one by one
    assert len(standin.requests) == sent + 2  # only the runs with tools went one by one
    stats = standin.batch_stats()
    assert stats["batches"] == 2 and sorted(stats["file_lines"]) == [2, 2]  # one file per model
    code, out, err = claw.build("--batch", "--wait", "--output", "json")
    assert code == 0, err
    assert {r["status"] for r in json.loads(out)["rows"]} == {"success"}
    batched = run_records(store())
    assert batched.keys() == sync.keys() and len(standin.requests) == sent + 2
    sync_store = Store(tmp_path / "store")
    for address, record in batched.items():
        if '"tools"' in address:
            continue
        assert record.summary["batch"]["cost_source"] == "reported"
        assert final_answer(store(), record) == final_answer(sync_store, sync[address])
    assert batch_doc.pending(store()) == []


def test_a_run_batch_line_reporting_a_cost_but_no_counts_has_unknown_tokens_and_its_cost(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0, "output": 8.0}) for m in d["models"]])
    standin.script("*", text("four", usage={"prompt_tokens": None, "completion_tokens": None, "total_tokens": None,
                                            "cost": 0.125}))
    code, out, err = claw.build("--batch", "--wait", "--output", "json")
    assert code == 0, err
    records = run_records(store()).values()
    assert len(records) == 4 and standin.batch_stats()["lines"] == 4
    for record in records:
        metrics = record.metrics
        assert (metrics.input_tokens, metrics.output_tokens, metrics.cost_usd, metrics.cost_source) == (
            None, None, 0.125, "reported"), metrics


def test_a_line_that_keeps_failing_is_sent_again_once_then_asked_one_by_one(scored: Workspace, claw: Claw,
                                                                             standin: StandIn) -> None:
    standin.batch_settings(fail_match="2 + 2")  # case alpha's judgements fail inside every batch (HTTP 500)
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["score"] for r in report["rows"]} == {7.0}
    stats = standin.batch_stats()
    assert stats["lines"] == 12 + 6  # alpha's 6 sent again once
    assert judge_requests(standin) == 6  # then one by one, with the client's own retries
    assert batch_doc.pending(store()) == []


def test_cancelling_a_batch_the_store_never_heard_the_id_of_cancels_it_at_the_provider(
        scored: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.providers.batch_api import BatchApi

    original = BatchApi.create

    def dies(self: BatchApi, input_file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        original(self, input_file_id, metadata)
        raise KeyboardInterrupt

    standin.batch_settings(delay=60)
    monkeypatch.setattr(BatchApi, "create", dies)
    assert claw.build("--evaluation-profile", "ev", "--batch")[0] == 130
    monkeypatch.setattr(BatchApi, "create", original)
    code, out, _ = claw("batch", "cancel", "--all", "--output", "json")
    assert code == 0 and json.loads(out)["cancelled"] == 1
    assert standin.batch_stats()["cancelled"] == 1 and batch_doc.pending(store()) == []


def test_the_progress_shows_each_batch(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    code, _, err = claw.build("--evaluation-profile", "ev", "--batch", "--wait", "--progress", "plain")
    assert code == 0
    assert "BATCH submitted batch batch_" in err and "(judge/j1, 12 request(s))" in err
    assert re.search(r"BATCH batch \S+ \(judge/j1, 12 request\(s\)\): completed, 12 completed, 0 failed", err)
    code, out, err = claw.build("--evaluation-profile", "ev", "--batch", "--progress", "json")
    assert code == 0  # nothing left to batch: no batch event
    assert '"event": "batches"' not in err


def test_cancel_names_what_is_wrong_in_one_line(scored: Workspace, claw: Claw) -> None:
    code, _, err = claw("batch", "cancel", "nope")
    assert code == 2 and err.startswith("claw: error: no batch named nope in store") and err.count("\n") == 1
    code, _, err = claw("batch", "cancel")
    assert code == 2 and "name the batches to cancel" in err


def test_a_first_ctrl_c_while_waiting_for_a_batch_ends_the_wait_at_once(scored: Workspace, claw: Claw,
                                                                         standin: StandIn,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # The build defers a first Ctrl-C to the next node's end (session 51); a wait between a batch's polls has no
    # node to finish: it must end there, not when the batch does.
    standin.batch_settings(delay=120)
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "60")
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev", "--batch",
                      "--wait")
    deadline = time.monotonic() + 30
    while standin.batch_stats()["batches"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # in the wait between polls
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 10 and "interrupted" in err
    [doc] = batch_doc.pending(store())
    assert doc.batch_id and len(doc.covered) == 12  # kept: the next build collects it


def test_a_batch_an_older_claw_submitted_with_a_judges_cost_is_collected_not_sent_again(
        scored: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> None:
    # its lines are keyed with the judge's `cost` (claw before session 58): the upgrade found them under no key of
    # this claw's, so a build sent every judgement again (a second batch, paid twice) and the first one's never counted
    from tests.support.oldclaw import old_claw, old_clawstore, runs_keyed_alike

    old = old_clawstore(tmp_path / "old")
    scored.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(cost={"input": 2.0, "output": 8.0}))
    runs_keyed_alike(scored.configs)  # (the older claw judges the runs this claw made, not runs them again)
    standin.batch_settings(delay=60)
    built = old_claw(old, scored.root, "build", "--suite", "main", "--run-profile", "rp",
                     "--evaluation-profile", "ev", "--batch")
    assert built.returncode == 0, built.stdout + built.stderr
    assert standin.batch_stats()["lines"] == 12 and judge_requests(standin) == 0
    standin.batch_settings(delay=0)  # it finishes
    code, report = build(claw, "--batch")
    assert code == 0, report
    assert {r["eval"] for r in report["rows"]} == {"exec"} and {r["score"] for r in report["rows"]} == {7.0}
    assert standin.batch_stats()["lines"] == 12 and standin.batch_stats()["batches"] == 1
    assert judge_requests(standin) == 0 and batch_doc.pending(store()) == []
    code, report = build(claw, "--batch")
    assert {r["eval"] for r in report["rows"]} == {"reuse"} and standin.batch_stats()["lines"] == 12


def test_max_cost_stopped_by_an_unknown_cost_says_so_when_judges_go_by_batch(ws: Workspace, claw: Claw,
                                                                            standin: StandIn) -> None:
    """A run (with tools: one by one) whose reply counts no tokens, at declared prices: its cost is unknown, so
    --max-cost starts nothing more and its judgements are not submitted. The build must say the limit cannot be kept
    and that what it spent is unknown, not that the limit was 'reached' with the known part as the spend."""
    eval_profile(ws, judges=[PRICED_JUDGE])
    ws.case("alpha", "Use the tools.", input={"messages": [{"role": "user", "content": "Use the tools."}],
                                              "context": {"llm_probe": {"tools": ["read_file"]}}})
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0, "output": 8.0}) for m in d["models"]])
    ws.edit("suites/main.yaml", lambda d: d.update(models=d["models"][:1]))
    ws.run_profile(concurrency=1)
    (ws.configs / "cases" / "beta").rename(ws.root / "beta-aside")  # one run: its judgements are what is left
    standin.script(JUDGE, judge_reply(7))
    standin.script("*", text("four", usage={"prompt_tokens": None, "completion_tokens": None, "total_tokens": None,
                                            "cost": None}))
    code, out, err = claw.build("--evaluation-profile", "ev", "--batch", "--max-cost", "100", "--output", "json")
    report = json.loads(out)
    assert code == 1 and report["metrics"]["cost_unknown"] == 1, out + err
    assert standin.batch_stats()["lines"] == 0 and judge_requests(standin) == 0  # no judgement started
    stopped = report["stopped"]
    assert "cannot be kept: a cost spent is unknown" in stopped and "? USD" in stopped, stopped
    assert "reached" not in stopped, stopped


def test_a_build_waiting_on_a_claim_does_not_ask_one_by_one_what_a_batch_stands_for_meanwhile(
        scored: Workspace, claw: Claw, standin: StandIn, reap: Reap) -> None:
    """Another build (here: the test) holds the 12 judgements' claims while it submits them in a batch, then lets them
    go: the batch stands for them. A build without --batch that planned before and waited on those claims must not
    ask them one by one after: the provider would bill each judgement twice (the line, and the request)."""
    from clawstore.store.claims import ClaimBoard

    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0  # the judgements' keys, from a batch then cancelled
    [doc] = batch_doc.pending(store())
    keys = [f"blake3:{k}" for k in doc.keys]
    assert claw("batch", "cancel", "--all")[0] == 0 and batch_doc.pending(store()) == []
    board = ClaimBoard(store().root, owner="submitting-build")
    assert all(board.take(key) for key in keys)
    waiting = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                              "--output", "json", "--progress", "plain"))
    time.sleep(3)  # it has planned (no batch then) and waits on the claims
    assert judge_requests(standin) == 0 and waiting.poll() is None
    _another_build_s_batch("submitted-meanwhile", doc, doc.keys)
    for key in keys:
        board.release(key)
    board.close()
    out, err = waiting.communicate(timeout=120)
    assert judge_requests(standin) == 0, (out, err)
    assert waiting.returncode == 0 and json.loads(out)["pending_in_batches"] == 12, (out, err)  # said pending
    # and the progress says so for each, the last line counting all 12 (before session 61 none had a line: a user
    # watching saw the judgements never end)
    lines = [line for line in err.splitlines() if line.startswith("[judges ")]
    assert len(lines) == 12 and lines[-1].startswith("[judges 12/12] "), err
    assert all(": pending (waits on batch submitted-meanwhile" in line for line in lines), err


def test_judgements_left_pending_in_a_batch_each_say_so_in_the_progress(scored: Workspace, claw: Claw,
                                                                        standin: StandIn) -> None:
    """A build that submits its judgements, or finds them in a batch another build submitted, and ends before the
    batch does: each is pending in the progress (a line, a 'pending' event, done for this build but counted as
    pending in the totals), as when it waited on their claims meanwhile (the test above). Before, the batch layer
    left them out, and the display never counted them done: 0 of 12 at the end."""
    standin.batch_settings(delay=60)
    for _ in range(2):  # submitted by this build, then found in the batch
        code, out, err = claw.build("--evaluation-profile", "ev", "--batch", "--progress", "json", "--output", "json")
        assert code == 0 and json.loads(out)["pending_in_batches"] == 12, out + err
        events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        pending = [e for e in events if e["event"] == "pending"]
        assert len(pending) == 12 and {e["kind"] for e in pending} == {"judge"}, err
        assert all(e["batch"] and e["reason"].startswith("waits on batch ") for e in pending), err
        [totals] = [e for e in events if e["event"] == "totals"]
        assert totals["done"] == totals["total"] and (totals["pending"], totals["failed"]) == (12, 0), totals
    assert standin.batch_stats()["batches"] == 1 and judge_requests(standin) == 0


def test_a_build_that_already_listed_a_batch_still_sees_one_submitted_while_it_runs(
        scored: Workspace, claw: Claw, standin: StandIn, reap: Reap) -> None:
    """As above, but the waiting build has asked what batches stand for before (another batch was pending, and its last
    answer is kept: builder/batch_doc.py covered_now): it runs 6 judgements one by one, waits on the 6 claims the test
    holds, and the test submits those 6 in a batch before letting them go. An answer kept from before that batch would
    have the build ask them one by one: paid twice."""
    from clawstore.store.claims import ClaimBoard

    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0  # the judgements' keys, from a batch then cancelled
    [doc] = batch_doc.pending(store())
    assert claw("batch", "cancel", "--all")[0] == 0 and batch_doc.pending(store()) == []
    _another_build_s_batch("elsewhere", doc, [oid_hex(store().put_json({"another judgement": i})) for i in range(3)])
    held = sorted(doc.keys)[:6]
    board = ClaimBoard(store().root, owner="submitting-build")
    assert all(board.take(f"blake3:{k}") for k in held)
    waiting = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                              "--output", "json", "--progress", "plain"))
    deadline = time.monotonic() + 60
    while judge_requests(standin) < 6 and time.monotonic() < deadline:  # the 6 it could claim, asked one by one
        time.sleep(0.05)
    time.sleep(0.5)  # and it waits on the others
    assert judge_requests(standin) == 6 and waiting.poll() is None
    _another_build_s_batch("submitted-meanwhile", doc, held)
    for key in held:
        board.release(f"blake3:{key}")
    board.close()
    out, err = waiting.communicate(timeout=120)
    assert judge_requests(standin) == 6, (out, err)
    assert waiting.returncode == 0 and json.loads(out)["pending_in_batches"] == 6, (out, err)


def _another_build_s_batch(name: str, like: BatchDoc, keys: list[str]) -> None:
    batch_doc.write_new(store(), BatchDoc(
        name=name, kind="judge", base_url=like.base_url, api_key_env=like.api_key_env, model=like.model,
        campaign_id=like.campaign_id, build_id="submitting-build", input_file_id=f"file-{name}", keys=keys,
        submitted_at=time.time()))


def test_a_batch_to_the_server_openrouter_base_url_names_needs_no_key(scored: Workspace, claw: Claw,
                                                                       standin: StandIn,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A server `$OPENROUTER_BASE_URL` names needs no key (docs/runners.md), by batch as one by one: `--batch` to the
    README's stand-in, without a key, stopped with `OPENROUTER_API_KEY is not set`, exit 2."""
    monkeypatch.delenv("OPENROUTER_API_KEY")
    standin.batch_settings(delay=60)
    code, report = build(claw, "--batch")
    assert code == 0 and report["pending_in_batches"] == 12, report
    args = ("batch", "status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert claw(*args)[0] == 1  # polled without a key: still pending
    standin.batch_settings(delay=0)
    code, report = build(claw)
    assert code == 0 and {r["eval"] for r in report["rows"]} == {"exec"}, report
    assert judge_requests(standin) == 0 and standin.batch_stats()["lines"] == 12


def test_runs_pending_in_a_batch_are_not_called_judgements(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """Runs without tools go by batch too: the build's last line said `pending: 4 judgement(s)` of 4 runs."""
    standin.batch_settings(delay=60)
    code, out, err = claw.build("--batch")
    assert code == 0, err
    assert "pending: 4 request(s) in provider batches" in out and "judgement" not in out, out


def test_a_run_batch_line_priced_from_declared_pricing_says_priced_not_reported(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's batch line without a cost, priced from the suite model's `pricing` times its `batch` factor: its record
    said `cost_source: reported` (the provider's figure) beside the batch summary's `priced`, so every total said
    `reported:4` of a cost claw worked out itself (docs/batch.md, Money: `priced`)."""
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0, "output": 8.0, "batch": 0.5})
                                           for m in d["models"]])
    standin.script("*", text("four", usage={"cost": None}))
    code, out, err = claw.build("--batch", "--wait")
    assert code == 0, err
    records = run_records(store()).values()
    assert len(records) == 4 and standin.batch_stats()["lines"] == 4
    for record in records:
        metrics = record.metrics
        expected = (metrics.input_tokens * 2.0 + metrics.output_tokens * 8.0) / 1e6 * 0.5
        assert metrics.cost_usd == pytest.approx(expected) and expected > 0
        assert record.summary["batch"]["cost_source"] == metrics.cost_source == "priced", metrics
    assert out.rstrip().endswith("(4 of 4 priced)"), out


def test_a_report_of_judgements_pending_in_a_batch_says_their_cost_is_not_in_it(scored: Workspace, claw: Claw,
                                                                                standin: StandIn) -> None:
    """Judgements submitted by batch and not yet collected are paid for once the batch ends, and no record holds them
    yet: `claw report` and `claw view` showed their rows' EVAL_COST 0.00000 and the campaign's evaluation 0.00000,
    saying nothing of them (nothing unknown is shown as 0: they say it is pending and left out)."""
    standin.batch_settings(delay=60)
    code, out, err = claw.build("--evaluation-profile", "ev", "--batch", "--output", "json")
    assert code == 0 and json.loads(out)["pending_in_batches"] == 12, out + err
    said = "claw: note: 12 request(s) of campaign main__rp__ev are pending in provider batches"
    for args in (("report", "--no-chart"), ("report", "--no-chart", "--output", "json"), ("view", "--out", "v.html")):
        code, out, err = claw(*args, "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
        assert code == 0, err
        assert said in err and "not in these figures" in err, (args, err)
    assert judge_requests(standin) == 0  # (a report asks the provider nothing)


def test_an_export_while_judgements_are_pending_in_a_batch_says_the_archive_pays_for_them_again(
        scored: Workspace, claw: Claw, standin: StandIn) -> None:
    """A build of the archive elsewhere cannot collect this store's batches (their refs do not travel in an archive):
    it sends those requests again. The export's note said it runs and pays for them "as one here would", which pays
    nothing more (session 77)."""
    standin.batch_settings(delay=60)
    code, out, err = claw.build("--evaluation-profile", "ev", "--batch", "--output", "json")
    assert code == 0 and json.loads(out)["pending_in_batches"] == 12, out + err
    code, out, err = claw("archive", "export", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                          "-o", "pending.claw")
    assert code == 0, err
    assert "12 of them are pending in provider batches here" in err, err
    assert "as one here would" not in err, err
