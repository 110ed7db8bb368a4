"""The model's outcomes (cached, scored, never re-sent) against the harness's and provider's faults
(retried), and a failed re-execution that never demotes a result (docs/building.md, "Failures")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn, error, text, tool_call
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

SUBJECT = "vendor/m1"


def subject_requests(standin: StandIn) -> int:
    return sum(1 for r in standin.requests if r["model"] == SUBJECT)


def judge_requests(standin: StandIn) -> list[dict[str, Any]]:
    return [r for r in standin.requests if r["model"] == JUDGE]


def build(claw: Claw, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json", *extra)
    assert out, err
    return code, json.loads(out)


def query(claw: Claw, sql: str) -> list[dict[str, Any]]:
    code, out, err = claw("query", "--format", "json", sql)
    assert code == 0, err
    return json.loads(out)


def store() -> Store:
    return Store(Path(os.environ["CLAW_STORE"]))


def records(kind: str) -> list[dict[str, Any]]:
    """The records the action cache points at, of one kind."""
    found = [store().get_action(key) for key, _ in store().iter_actions()]
    return [r for r in found if r is not None and r.kind == kind]


def tool_case(ws: Workspace, tools: list[str] | None, max_turns: int | None = None, **extra: Any) -> None:
    """One case `probe` for model m1; `tools` enabled (None: no tools)."""
    doc: dict[str, Any] = {"messages": [{"role": "user", "content": "Find the answer."}]}
    if tools is not None:
        doc["context"] = {"llm_probe": {"tools": tools}}
    runner: dict[str, Any] = {"type": "llm_probe"}
    if max_turns is not None:
        runner["max_turns"] = max_turns
    ws.case("probe", "Find the answer.", input=doc, runner=runner, **extra)
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["probe"]})


def test_a_tool_looping_model_is_incomplete_scored_and_never_sent_again(ws: Workspace, claw: Claw,
                                                                        standin: StandIn) -> None:
    tool_case(ws, ["read_file"], max_turns=6, deterministic_checks=[
        {"check_id": "ended_incomplete", "declarative": {"kind": "status_is", "status": "incomplete"}},
        {"check_id": "six_calls", "declarative": {"kind": "tool_call_count", "count": 6}},
        {"check_id": "answered", "declarative": {"kind": "final_response_present"}}])
    eval_profile(ws, repetitions=1)
    standin.script(SUBJECT, tool_call("read_file", {"path": "/clue.txt"}))
    standin.script(JUDGE, judge_reply(3))
    code, report = build(claw)
    row = report["rows"][0]
    assert (row["run"], row["status"], row["eval"], row["score"]) == ("exec", "incomplete", "exec", 3.0)
    assert code == 1  # like `invalid`: the build says not every run succeeded
    assert subject_requests(standin) == 6
    [run] = records("run")
    assert run.status == "incomplete" and run.cacheable is True
    assert run.error["code"] == "max_turns_exceeded"
    [checks] = records("checks")
    assert [c["outcome"] for c in checks.summary["checks"]] == ["passed", "passed", "failed"]
    [judged] = judge_requests(standin)
    prompt = judged["body"]["messages"][-1]["content"]
    assert "incomplete" in prompt and "/clue.txt" in prompt  # the judge sees the conversation so far
    standin.reset()
    code, report = build(claw)
    row = report["rows"][0]
    assert (row["run"], row["status"], row["eval"], row["score"]) == ("reuse", "incomplete", "reuse", 3.0)
    assert standin.requests == []
    assert query(claw, "select status, error_code, cacheable from runs") == [
        {"status": "incomplete", "error_code": "max_turns_exceeded", "cacheable": True}]
    code, out, _ = claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                        "--output", "json", "--no-chart")
    [reported] = json.loads(out)["rows"]
    assert code == 0 and reported["status"] == "incomplete" and reported["score"] == 3.0
    assert any("incomplete (max_turns_exceeded" in problem for problem in reported["problems"])


# Each model-outcome row of docs/building.md's table: what the model does, the tools the case enables,
# the status and error code it ends in, and the requests it costs.
MODEL_OUTCOMES = {
    "empty answer": (text(""), None, "invalid", "empty_output", 1),
    "tool calls without tools": (tool_call("read_file", {"path": "/x"}), None, "invalid",
                                 "tool_calls_not_supported", 1),
    "max_turns exhausted": (tool_call("read_file", {"path": "/x"}), ["read_file"], "incomplete",
                            "max_turns_exceeded", 2),
    "malformed tool-call arguments": (tool_call("read_file", "{not json"), ["read_file"], "incomplete",
                                      "max_turns_exceeded", 2),
    "unknown tool name": (tool_call("teleport", {"to": "mars"}), ["read_file"], "incomplete",
                          "max_turns_exceeded", 2),
    "a tool the case does not enable": (tool_call("exec_shell", {"command": "true"}), ["read_file"], "incomplete",
                                        "max_turns_exceeded", 2),
}


@pytest.mark.parametrize("outcome", sorted(MODEL_OUTCOMES))
def test_each_model_outcome_is_cached_and_scored(ws: Workspace, claw: Claw, standin: StandIn, outcome: str) -> None:
    reply, tools, status, code_name, sent = MODEL_OUTCOMES[outcome]
    tool_case(ws, tools, max_turns=2 if tools else None)
    eval_profile(ws, repetitions=1)
    standin.script(SUBJECT, reply)
    standin.script(JUDGE, judge_reply(2))
    _, report = build(claw)
    row = report["rows"][0]
    assert (row["run"], row["status"], row["eval"], row["score"]) == ("exec", status, "exec", 2.0)
    assert subject_requests(standin) == sent and len(judge_requests(standin)) == 1
    [run] = records("run")
    assert run.cacheable is True and run.error["code"] == code_name
    standin.reset()
    _, report = build(claw)
    assert (report["rows"][0]["run"], report["rows"][0]["eval"]) == ("reuse", "reuse")
    assert standin.requests == []


def test_a_broken_tool_call_followed_by_an_answer_succeeds(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    tool_case(ws, ["read_file"])
    standin.script(SUBJECT, tool_call("read_file", "{not json"), tool_call("teleport", {}), text("42"))
    code, out, _ = claw.build("--output", "json")
    assert code == 0 and json.loads(out)["rows"][0]["status"] == "success"
    assert subject_requests(standin) == 3


def test_a_forced_rebuild_over_an_outage_keeps_the_earlier_success(ws: Workspace, claw: Claw, standin: StandIn,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    tool_case(ws, None)
    eval_profile(ws, repetitions=1)
    standin.script(SUBJECT, text("42"))
    standin.script(JUDGE, judge_reply(9))
    code, report = build(claw)
    assert code == 0 and report["rows"][0]["score"] == 9.0
    [good] = records("run")
    standin.reset()
    standin.script("*", error(500))  # the provider is down, for the subject and the judge
    code, report = build(claw, "--force")
    row = report["rows"][0]
    assert code == 1 and (row["run"], row["status"]) == ("fail", "provider_error")
    [failure] = [f for f in report["failures"] if f["node"].startswith("run/")]
    assert failure["reason"].startswith("http_error") and failure["reason"].endswith("; the earlier result is kept")
    assert subject_requests(standin) == 3  # retries: 2 → three attempts, reported as this build's failure
    assert records("run") == [good]  # the entry still points at the success
    # The campaign's state keeps the success; the build's history keeps the failure.
    assert query(claw, "select status from runs") == [{"status": "success"}]
    code, out, _ = claw("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                        "--output", "json")
    [counts] = json.loads(out)["models"].values()
    assert code == 0 and (counts["fresh"], counts["failed"]) == (1, 0)
    assert query(claw, "select status, action from run_history order by build_started_at, status") == [
        {"status": "success", "action": "exec"}, {"status": "provider_error", "action": "fail"}]
    standin.reset()
    standin.script("*", error(500))  # any request would fail: none is sent
    code, report = build(claw)
    row = report["rows"][0]
    assert code == 0 and (row["run"], row["status"], row["eval"], row["score"]) == ("reuse", "success", "reuse", 9.0)
    assert standin.requests == []


def test_runs_skipped_after_stop_on_runner_error_say_skip_in_every_status_column(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=1, stop_on_runner_error=True, defaults={"retries": 0})
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(8))
    assert build(claw)[0] == 0  # alpha and beta succeed and are scored
    standin.script(SUBJECT, error(500), match="2 + 2")  # alpha's request fails: nothing after it starts
    code, report = build(claw, "--force")
    rows = {r["case_id"]: r for r in report["rows"]}
    assert code == 1 and (rows["alpha"]["run"], rows["alpha"]["status"]) == ("fail", "provider_error")
    skipped = rows["beta"]
    assert (skipped["run"], skipped["status"], skipped["eval"], skipped["eval_status"]) == ("skip",) * 4
    assert skipped["score"] is None and skipped["cost_usd"] is None
    code, out, _ = claw.build("--evaluation-profile", "ev", "--force")
    [line] = [line.split() for line in out.splitlines() if line.startswith("m1") and " beta " in line]
    assert line[3:5] == ["skip", "skip"] and line[-2] == "skip" and "success" not in line


def test_a_model_outcome_is_not_a_runner_error(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    tool_case(ws, ["read_file"], max_turns=1)
    ws.case("then", "Name a colour.")
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["probe", "then"]})
    ws.run_profile(concurrency=1, stop_on_runner_error=True)
    standin.script(SUBJECT, tool_call("read_file", {"path": "/x"}), match="Find the answer")
    standin.script(SUBJECT, text("blue"), match="colour")
    code, out, _ = claw.build("--output", "json")
    rows = {r["case_id"]: (r["run"], r["status"]) for r in json.loads(out)["rows"]}
    assert rows == {"probe": ("exec", "incomplete"), "then": ("exec", "success")}  # in this order
    assert code == 1
    ws.run_profile(concurrency=1, fail_fast=True)  # fail_fast stops on any run that did not succeed
    code, out, _ = claw.build("--output", "json", "--force")
    rows = {r["case_id"]: (r["run"], r["status"]) for r in json.loads(out)["rows"]}
    assert rows["then"] == ("skip", "skip") and rows["probe"] == ("exec", "incomplete")


def test_a_run_that_fails_after_an_edit_leaves_no_score_of_the_run_it_replaced(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The campaign head merges a build's nodes over the previous ones by address: a case edited, its new run failing
    (so never judged), kept the previous run's checks, judgements and result beside the failed run. `claw report`
    showed `RUN fail  EVAL reuse  SCORE 8.00  PASS pass`, the leaderboard that model's old mean and pass rate, and
    `claw compare` against a pin of the state before matched the old scores: "within noise" (s60-qa). The evaluation
    of a run the build replaced by another key goes with it."""
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.suite("main", ["m1"])
    ws.run_profile(defaults={"retries": 0})
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(8))
    assert build(claw)[0] == 0
    assert claw("pin", "before", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")[0] == 0
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))
    standin.script(SUBJECT, error(500), match="3 + 3")
    code, report = build(claw)
    rows = {r["case_id"]: r for r in report["rows"]}
    assert code == 1 and (rows["alpha"]["run"], rows["alpha"]["score"]) == ("fail", None), report

    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                          "--output", "json", "--no-chart")
    rows = {r["case_id"]: r for r in json.loads(out)["rows"]}
    assert code == 0 and (rows["alpha"]["score"], rows["alpha"]["eval_action"]) == (None, None), out + err
    assert rows["beta"]["score"] == 8.0 and rows["alpha"]["passed"] is None, out + err
    assert query(claw, "select case_id, final_score from results order by case_id") == [
        {"case_id": "beta", "final_score": 8.0}]
    code, out, err = claw("compare", "before", "main__rp__ev", "--output", "json")
    assert code == 0 and json.loads(out)["unmatched"] == ["m1/alpha scored only in A"], out + err
    assert claw("explain", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")[0] == 0


def test_a_run_forced_again_and_stopped_before_its_judgement_shows_no_score_of_the_run_it_replaced(
        ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """`claw build --force` executes a run again under the same key; a build stopped before its judgement (here by
    --max-cost, which gates judgements too; Ctrl-C alike) kept the judgement and result of the run replaced beside the
    new one: `claw report` showed the old score for an answer no judge had read (s60-review2)."""
    ws.suite("main", ["m1"])
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(8))
    assert build(claw)[0] == 0
    standin.script(SUBJECT, text("Another answer altogether.", usage={"cost": 0.5}))  # (dearer than planned)
    code, report = build(claw, "--force", "--max-cost", "0.01")
    again = {r["case_id"] for r in report["rows"] if r["run"] == "exec"}
    assert code == 1 and again and report["stopped"], report

    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                          "--output", "json", "--no-chart")
    rows = {r["case_id"]: r for r in json.loads(out)["rows"]}
    assert code == 0 and all(rows[case]["score"] is None for case in again), out + err
    assert all(row["score"] == 8.0 for case, row in rows.items() if case not in again), out + err
