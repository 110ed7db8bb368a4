"""`claw build` against a stand-in behaving as Ollama past its context: a tool loop whose prompt count falls is the
model's outcome on that server (incomplete/prompt_truncated_by_server: kept, shown, never sent again), and a long prompt
counted as a few tokens is warned in the build's output, by run and by judgement (docs/runners.md)."""

from __future__ import annotations

import json
from typing import Any

from clawstore.testing.standin import StandIn, text, tool_call
from tests.builder.test_model_outcomes import (
    SUBJECT,
    build,
    judge_requests,
    query,
    records,
    subject_requests,
    tool_case,
)
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

PROSE = ("The committee reviewed every budget line before the vote, and the minutes record each objection. "
         * 205)[:20_000]


def counted(reply: dict[str, Any], prompt: int) -> dict[str, Any]:
    return {**reply, "usage": {"prompt_tokens": prompt}}


def test_a_loop_the_server_cut_is_incomplete_kept_and_never_sent_again(ws: Workspace, claw: Claw,
                                                                       standin: StandIn) -> None:
    tool_case(ws, ["read_file"], max_turns=6)
    eval_profile(ws, repetitions=1)
    standin.script(SUBJECT, *(counted(tool_call("read_file", {"path": f"/{n}.txt"}), prompt)
                              for n, prompt in enumerate([1500, 1900, 1026])), text("done"))
    standin.script(JUDGE, judge_reply(4))
    code, report = build(claw)
    row = report["rows"][0]
    assert (row["run"], row["status"], row["eval"], row["score"]) == ("exec", "incomplete", "exec", 4.0)
    assert code == 1 and subject_requests(standin) == 3  # the cut conversation is not paid for further
    [run] = records("run")
    assert run.status == "incomplete" and run.cacheable is True
    assert run.error["code"] == "prompt_truncated_by_server" and "call 2's 1900" in run.error["message"]
    standin.reset()
    code, report = build(claw)
    assert report["rows"][0]["run"] == "reuse" and standin.requests == []
    assert query(claw, "select status, error_code, cacheable from runs") == [
        {"status": "incomplete", "error_code": "prompt_truncated_by_server", "cacheable": True}]
    code, out, _ = claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                        "--output", "json", "--no-chart")
    [reported] = json.loads(out)["rows"]
    assert any("incomplete (prompt_truncated_by_server" in problem for problem in reported["problems"])


def prose_case(ws: Workspace) -> None:
    ws.case("long", PROSE)
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["long"]})
    eval_profile(ws, repetitions=1)


def test_a_long_prompt_counted_as_a_few_tokens_is_warned_by_the_build(ws: Workspace, claw: Claw,
                                                                      standin: StandIn) -> None:
    prose_case(ws)
    standin.script(SUBJECT, counted(text("an answer"), 2048))
    standin.script(JUDGE, counted(judge_reply(6), 2048))
    code, out, err = claw.build("--evaluation-profile", "ev")
    assert code == 0, out + err
    assert "\nwarnings (2):\n" in out, out
    warned = out.split("\nwarnings (2):\n", 1)[1].splitlines()
    assert warned[0].startswith("  run/m1/long/") and "2048 prompt tokens for" in warned[0]
    assert warned[1].startswith("  judge/m1/long/") and "2048 prompt tokens for" in warned[1]
    assert "num_ctx" in warned[0] and len(judge_requests(standin)) == 1
    [judged] = records("judge")
    assert judged.status == "success" and "2048 prompt tokens" in judged.summary["prompt_warning"]  # not a status
    [run] = query(claw, "select status, prompt_warning from runs")
    assert run["status"] == "success" and run["prompt_warning"].startswith("the server counted 2048 prompt tokens")
    [judgement] = query(claw, "select prompt_warning from judgements")
    assert "2048 prompt tokens" in judgement["prompt_warning"]
    code, out, _ = claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                        "--output", "json", "--no-chart")
    [reported] = json.loads(out)["rows"]
    problems = reported["problems"]
    assert reported["status"] == "ok" and sorted(p.split(": warning: ")[0] for p in problems) == [
        "judge rep 0 judge main#0", "run rep 0"], problems
    assert all("2048 prompt tokens for" in p for p in problems)


def test_a_long_prompt_counted_plausibly_is_not_warned(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    prose_case(ws)
    standin.script(SUBJECT, text("an answer"))  # the stand-in's own counts: words, about 5.5 characters a token
    standin.script(JUDGE, judge_reply(6))
    code, report = build(claw)
    assert code == 0 and report["warnings"] == [] and report["rows"][0]["status"] == "success"
    assert query(claw, "select prompt_warning from runs") == [{"prompt_warning": None}]
    assert query(claw, "select prompt_warning from judgements") == [{"prompt_warning": None}]
