"""Evaluation layers through `claw build`: keys, retries of broken judges, aggregation for free."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, build, eval_profile, judge_reply, judge_requests
from tests.support.workspace import Workspace


def subject_requests(standin: StandIn) -> int:
    return sum(1 for r in standin.requests if r["model"] != JUDGE)




@pytest.fixture
def scored(ws: Workspace, standin: StandIn) -> Workspace:
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    return ws


def test_one_judge_request_per_run_and_repetition_then_nothing(scored: Workspace, claw: Claw,
                                                              standin: StandIn) -> None:
    code, report = build(claw)
    assert code == 0, report
    assert subject_requests(standin) == 4 and judge_requests(standin) == 12
    assert {r["eval"] for r in report["rows"]} == {"exec"}
    assert {r["score"] for r in report["rows"]} == {7.0}
    code, report = build(claw)
    assert code == 0
    assert len(standin.requests) == 16
    assert {r["eval"] for r in report["rows"]} == {"reuse"}


def test_editing_a_rubric_rejudges_only_that_case(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    assert build(claw)[0] == 0
    scored.edit("cases/alpha/test.yaml", lambda d: d.update(rubric={
        "scale": {"min": 0, "max": 10, "anchors": {"10": "Perfect."}},
        "criteria": [{"name": "Right", "what_good_looks_like": "4", "what_bad_looks_like": "not 4"}]}))
    code, report = build(claw)
    assert code == 0
    assert subject_requests(standin) == 4  # no subject re-run
    assert judge_requests(standin) == 12 + 2 * 3  # alpha × 2 models × 3 repetitions
    rejudged = {(r["model_id"], r["case_id"]) for r in report["rows"] if r["eval"] == "exec"}
    assert rejudged == {("m1", "alpha"), ("m2", "alpha")}
    code, out, _ = claw("explain", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert "everything is fresh" in out
    scored.edit("cases/beta/test.yaml", lambda d: d.update(expectations={"hard_expectations": [{"text": "Red."}]}))
    code, out, _ = claw("explain", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert "judge m1 beta rep 0" in out and "target.hard_expectations" in out
    assert "run m1" not in out


def test_aggregation_changes_cost_nothing_and_change_results(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    eval_profile(ws, method="median", threshold=0.7)
    standin.script(JUDGE, judge_reply(2), judge_reply(8), judge_reply(9))
    code, report = build(claw)
    assert report["rows"][0]["score"] == 8.0 and report["rows"][0]["passed"] is True
    sent = len(standin.requests)
    eval_profile(ws, method="mean", threshold=0.7)
    code, report = build(claw)
    assert len(standin.requests) == sent
    assert report["rows"][0]["score"] == pytest.approx(19 / 3) and report["rows"][0]["passed"] is False
    eval_profile(ws, method="mean", threshold=0.5)
    code, report = build(claw)
    assert len(standin.requests) == sent and report["rows"][0]["passed"] is True
    eval_profile(ws, method="all_pass", threshold=0.5)
    code, report = build(claw)
    assert report["rows"][0]["score"] == 2.0 and report["rows"][0]["passed"] is False
    assert code == 0  # a failed verdict is a result, not a build failure
    assert len(standin.requests) == sent


def test_more_judge_repetitions_send_one_request_per_run(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    assert build(claw)[0] == 0
    eval_profile(scored, repetitions=4)
    code, report = build(claw)
    assert code == 0
    assert judge_requests(standin) == 12 + 4
    assert subject_requests(standin) == 4


def test_non_json_judge_fails_and_is_retried_next_build(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, text("I think it is fine, 7/10."))
    code, report = build(claw)
    assert code == 1
    row = report["rows"][0]
    assert row["eval"] == "fail" and row["score"] is None
    assert judge_requests(standin) == 3  # invalid → retried within the judge's 3 attempts
    store = Store(Path(os.environ["CLAW_STORE"]))
    judges = [store.get_action(k) for k, _ in store.iter_actions()]
    judge = next(r for r in judges if r and r.kind == "judge")
    assert judge.status == "invalid" and judge.cacheable is False
    standin.reset()
    standin.script(JUDGE, judge_reply(6))
    code, report = build(claw)
    assert code == 0
    assert judge_requests(standin) == 1 and subject_requests(standin) == 0
    assert report["rows"][0]["score"] == 6.0


def test_result_links_summary_and_exact_prompt(scored: Workspace, claw: Claw, standin: StandIn) -> None:
    scored.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    assert build(claw)[0] == 0
    store = Store(Path(os.environ["CLAW_STORE"]))
    records = [store.get_action(k) for k, _ in store.iter_actions()]
    result = next(r for r in records if r.kind == "result")
    summary = store.get_bytes(result.outputs["summary_md"]).decode()
    assert "# Evaluation Result" in summary and "7" in summary
    request = store.get_json(result.outputs["judge_requests"][0])
    sent = next(r for r in standin.requests if r["model"] == JUDGE)
    assert request["messages"] == sent["messages"]
    assert "vendor/m1" not in json.dumps(request)  # blind to the subject model
    code, out, _ = claw("cat", result.outputs["summary_md"])
    assert code == 0 and out == summary


def test_python_hooks_are_gated_by_the_profile(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    hook = ws.configs / "cases" / "alpha" / "hooks" / "check.py"
    hook.parent.mkdir(parents=True)
    hook.write_text("def check(artifact):\n    return artifact['status'] == 'success'\n")
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "hook", "python_hook": {"path": "hooks/check.py", "callable_name": "check"}}]))
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(5))
    assert build(claw)[0] == 0
    store = Store(Path(os.environ["CLAW_STORE"]))
    checks = [store.get_action(k) for k, _ in store.iter_actions()]
    record = next(r for r in checks if r.kind == "checks")
    assert record.summary["checks"][0]["outcome"] == "error"
    assert "allow_local_python_hooks" in record.summary["checks"][0]["message"]
    judges_before = judge_requests(standin)
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})
    assert build(claw)[0] == 0
    records = [store.get_action(k) for k, _ in store.iter_actions()]
    outcomes = {r.summary["checks"][0]["outcome"] for r in records if r.kind == "checks"}
    assert outcomes == {"error", "passed"}
    assert judge_requests(standin) == judges_before + 1  # new check results → the judge sees them
    assert subject_requests(standin) == 1


def test_judge_replies_never_json_say_which_layers_failed(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    # "0 executed, 4 reused, 8 failed" beside the judgements' cost read as if nothing had run
    eval_profile(ws, repetitions=1)
    assert claw.build()[0] == 0  # the runs, reused below
    standin.script(JUDGE, text("I think it is fine."))
    code, out, _ = claw.build("--evaluation-profile", "ev")
    assert code == 1 and judge_requests(standin) >= 4  # (each retried: never valid)
    line = next(line for line in out.splitlines() if line.startswith("build "))
    assert "4 executed, 4 reused, 8 failed (4 judgements, 4 results), 0 skipped" in line, line  # (checks, runs)
