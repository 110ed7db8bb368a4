"""Unknown tokens are never summed as 0: a run whose usage was not believed (`usage_rejected`) makes every token
total it is part of say so, as its cost does: `≥` what is known in the build line and `claw report`'s TOKENS_IN and
TOKENS_OUT, null in JSON (the build's, its progress totals, the report's), NULL in `claw query` (real `claw`
processes, the stand-in server; the queries, which read what a build left, in the test's own process)."""

from __future__ import annotations

import json
from typing import Any

from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def _json(root: Any, *args: str) -> Any:
    done = run_claw(root, *args)
    assert done.code == 0 and "Traceback" not in done.stderr, done
    return json.loads(done.stdout)


def _read(root: Any, *args: str) -> Any:
    """A query of what the build left, in this process (tests/support/prepared.py): its JSON."""
    done = run_here(root, *args)
    assert done.code == 0 and "Traceback" not in done.stderr, done
    return json.loads(done.stdout)


def test_a_run_whose_tokens_are_unknown_makes_its_sums_unknown_never_0(ws: Workspace,  # noqa: F811
                                                                        standin: StandIn) -> None:
    ws.suite("main", ["good", "silent", "rejected"])
    standin.script("vendor/silent", text("four", usage={"completion_tokens": 1e30}))  # usage not believed
    standin.script("vendor/rejected", text("four", usage={"cost": "0.5"}))
    built = run_claw(ws.root, "build", *CAMPAIGN, "--progress", "json")
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built
    totals = [event for event in map(json.loads, built.stderr.splitlines()) if event.get("event") == "totals"]
    assert [(t["input_tokens"], t["output_tokens"], t["tokens_unknown"]) for t in totals] == [(None, None, 4)], totals
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    good = _read(ws.root, "query", "select sum(input_tokens) as i, sum(output_tokens) as o from runs "
                                   "where model_id = 'good'", "--format", "json")[0]
    assert f"tokens in ≥{good['i']} out ≥{good['o']} (4 of 6 unknown)" in line, line

    report = run_claw(ws.root, "report", *CAMPAIGN, "--no-chart")
    assert report.code == 0, report
    cells = {tuple(row.split()[:2]): row.split() for row in report.stdout.splitlines()
             if row.split()[:1] in (["good"], ["silent"], ["rejected"])}
    assert all("?" in cells[(model, "alpha")][6:8] for model in ("silent", "rejected")), report.stdout
    assert "0" not in cells[("silent", "alpha")][6:8], report.stdout
    rows = _json(ws.root, "report", *CAMPAIGN, "--no-chart", "--output", "json")
    for row in rows["rows"] + rows["models"]:
        if row["model_id"] == "good":
            assert row["input_tokens"] > 0 and row["tokens_unknown"] == 0, row
        else:
            assert (row["input_tokens"], row["output_tokens"], row["known_input_tokens"]) == (None, None, 0), row

    builds = _read(ws.root, "query", "select input_tokens, output_tokens from builds", "--format", "json")
    assert builds == [{"input_tokens": None, "output_tokens": None}], builds
    by_model = {r["model_id"]: r for r in _read(ws.root, "query", "cost_by_model", "--format", "json")}
    assert by_model["good"]["input_tokens"] == good["i"] and by_model["silent"]["input_tokens"] is None, by_model
    assert by_model["rejected"]["output_tokens"] is None, by_model
    as_json = _json(ws.root, "build", *CAMPAIGN, "--force", "--output", "json")["metrics"]
    assert (as_json["input_tokens"], as_json["input_tokens_known"], as_json["tokens_unknown"]) == (
        None, good["i"], 4), as_json


def test_cost_by_model_s_reasoning_tokens_are_unknown_with_a_run_s_tokens(ws: Workspace,  # noqa: F811
                                                                          standin: StandIn) -> None:
    """A model one of whose runs counted no tokens: cost_by_model's input and output tokens were NULL, and its
    reasoning tokens the other runs' sum, 0, beside them (session 77's newcomer, against a server sending no usage)."""
    ws.suite("main", ["good", "half"])
    standin.script("vendor/half", text("four", usage={"prompt_tokens": None, "completion_tokens": None,
                                                      "total_tokens": None, "cost": None}), match="2 + 2")
    built = run_here(ws.root, "build", *CAMPAIGN)  # (prepares what the queries read: in this process)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built
    runs = _read(ws.root, "query", "select case_id, reasoning_tokens from runs where model_id = 'half' order by 1",
                 "--format", "json")
    assert runs == [{"case_id": "alpha", "reasoning_tokens": None}, {"case_id": "beta", "reasoning_tokens": 0}], runs
    by_model = {r["model_id"]: r for r in _read(ws.root, "query", "cost_by_model", "--format", "json")}
    assert by_model["half"]["input_tokens"] is None and by_model["half"]["reasoning_tokens"] is None, by_model
    assert by_model["good"]["reasoning_tokens"] == 0, by_model


def test_a_reply_without_usage_has_unknown_tokens_and_cost_even_when_priced(ws: Workspace,  # noqa: F811
                                                                             standin: StandIn) -> None:
    # a server that sends no `usage` (or one without token counts): before, 0 tokens, priced at 0.0 USD
    ws.suite("main", ["silent", "half"])
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0, "output": 8.0}) for m in d["models"]])
    standin.script("vendor/silent", text("four", usage={"prompt_tokens": None, "completion_tokens": None,
                                                        "total_tokens": None, "cost": None}))
    standin.script("vendor/half", text("four", usage={"completion_tokens": None, "total_tokens": None, "cost": None}))
    built = run_claw(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    assert "tokens in ? out ? (4 of 4 unknown)" in line and "cost spent ? USD (4 of 4 unknown)" in line, line
    runs = _read(ws.root, "query", "select input_tokens, output_tokens, cost_usd, cost_source from runs",
                 "--format", "json")
    assert runs == [{"input_tokens": None, "output_tokens": None, "cost_usd": None, "cost_source": "unknown"}] * 4


def test_a_reply_reporting_a_cost_but_no_tokens_keeps_its_cost(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    # OpenRouter-style `usage: {cost}` without counts: the tokens are unknown, the reported cost is known (session 57's
    # merge threw it away: 'cost spent ? USD (2 of 2 unknown)'); zeros reported are 0, not unknown
    ws.suite("main", ["paid", "zero"])
    standin.script("vendor/paid", text("four", usage={"prompt_tokens": None, "completion_tokens": None,
                                                      "total_tokens": None, "cost": 0.25}))
    standin.script("vendor/zero", text("four", usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                                                      "cost": 0}))
    built = run_claw(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    assert line.endswith("tokens in ≥0 out ≥0 (2 of 4 unknown); cost spent 0.500000 USD"), line
    runs = _read(ws.root, "query", "select model_id, input_tokens, output_tokens, cost_usd, cost_source from runs "
                 "order by model_id", "--format", "json")
    assert runs == [{"model_id": "paid", "input_tokens": None, "output_tokens": None, "cost_usd": 0.25,
                     "cost_source": "reported"}] * 2 + [
        {"model_id": "zero", "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "cost_source": "reported"}] * 2


def test_token_counts_sent_as_null_are_unknown_not_0(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    # a server writing `"prompt_tokens": null` reported no count: before, its null was read as 0 tokens, priced at 0
    ws.suite("main", ["nulls"])
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0, "output": 8.0}) for m in d["models"]])
    standin.script("vendor/nulls", {"body": {
        "id": "gen-1", "object": "chat.completion", "created": 1, "model": "vendor/nulls",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "four"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}}})
    built = run_here(ws.root, "build", *CAMPAIGN)  # (prepares what the queries read: in this process)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built
    runs = _read(ws.root, "query", "select input_tokens, output_tokens, cost_usd, cost_source from runs",
                 "--format", "json")
    assert runs == [{"input_tokens": None, "output_tokens": None, "cost_usd": None, "cost_source": "unknown"}] * 2


def test_a_judge_reply_without_usage_has_unknown_tokens_and_cost_even_when_priced(ws: Workspace,  # noqa: F811
                                                                                   standin: StandIn) -> None:
    # before: a judge's reply without `usage` (or with half of it) counted 0 tokens, priced at 0.0 USD
    from tests.support.judging import JUDGE, eval_profile, judge_reply

    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing={"input": 1.0, "output": 4.0}))
    none = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None, "cost": None}
    standin.script(JUDGE, {**judge_reply(7), "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cost": None}},
                   match="Name a colour")  # beta: a free answer, said so: 0 tokens, priced at 0
    standin.script(JUDGE, {**judge_reply(7), "usage": none}, match="SILENT-ANSWER")
    standin.script(JUDGE, {**judge_reply(7), "usage": {**none, "prompt_tokens": 9}}, match="HALF-ANSWER")
    standin.script("vendor/m1", text("SILENT-ANSWER"))
    standin.script("vendor/m2", text("HALF-ANSWER"))
    campaign = (*CAMPAIGN, "--evaluation-profile", "ev")
    built = run_claw(ws.root, "build", *campaign)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built

    judged = _read(ws.root, "query", "select case_id, model_id, input_tokens, output_tokens, cost_usd, cost_source "
                                     "from judgements order by case_id, model_id", "--format", "json")
    unknown = {"input_tokens": None, "output_tokens": None, "cost_usd": None, "cost_source": "unknown"}
    free = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "cost_source": "priced"}
    assert judged == [{"case_id": "alpha", "model_id": "m1", **unknown},
                      {"case_id": "alpha", "model_id": "m2", **unknown},
                      {"case_id": "beta", "model_id": "m1", **free}, {"case_id": "beta", "model_id": "m2", **free}]
    runs = _read(ws.root, "query", "select sum(input_tokens) as i, sum(output_tokens) as o from runs", "--format",
                 "json")[0]
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    assert f"tokens in ≥{runs['i']} out ≥{runs['o']} (2 of 8 unknown)" in line, line
    assert line.split("; cost spent ")[1].endswith(" USD (2 of 8 unknown, 2 of 8 priced)"), line  # (the free two)
    assert line.split("; cost spent ")[1].startswith("≥"), line

    report = _json(ws.root, "report", *campaign, "--no-chart", "--output", "json")
    assert report["totals"]["eval_cost_usd"] is None and report["totals"]["cost_sources"]["unknown"] == 2, report
    text_report = run_claw(ws.root, "report", *campaign, "--no-chart")
    assert text_report.code == 0, text_report
    assert "evaluation ≥0.00000  total ≥" in text_report.stdout, text_report.stdout
    assert "(2 of 8 unknown, 2 of 8 priced)" in text_report.stdout, text_report.stdout
    eval_cost = {tuple(row.split()[:2]): row.split()[11] for row in text_report.stdout.splitlines()
                 if row.split()[:1] in (["m1"], ["m2"]) and row.split()[2:3] == ["1"]}
    assert eval_cost == {("m1", "alpha"): "?", ("m2", "alpha"): "?", ("m1", "beta"): "0.00000",
                         ("m2", "beta"): "0.00000"}, text_report.stdout
    builds = _read(ws.root, "query", "select input_tokens, output_tokens, cost_usd, cost_unknown from builds",
                   "--format", "json")
    assert builds == [{"input_tokens": None, "output_tokens": None, "cost_usd": None, "cost_unknown": 2}], builds
    by_model = _read(ws.root, "query", "cost_by_model", "--format", "json")
    assert all(row["total_cost_usd"] is None for row in by_model), by_model


def test_a_free_model_whose_reply_counts_no_tokens_costs_a_known_0(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    # unknown tokens × prices all 0 is 0 USD (before: `?`, unknown); a model with a price stays unknown, and so does a
    # free model's reply whose cost is not believed (a cost was sent: the declared price does not say it)
    from tests.support.judging import JUDGE, eval_profile, judge_reply

    ws.suite("main", ["free", "paid", "garbled"])
    prices = {"free": {"input": 0, "output": 0}, "paid": {"input": 2.0, "output": 8.0}, "garbled": {"input": 0,
                                                                                                  "output": 0}}
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=prices[m["model_id"]]) for m in d["models"]])
    none = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None, "cost": None}
    standin.script("vendor/free", text("four", usage=none))
    standin.script("vendor/paid", text("four", usage=none))
    standin.script("vendor/garbled", text("four", usage={"cost": "0.5"}))
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing={"input": 0, "output": 0.0}))
    standin.script(JUDGE, {**judge_reply(7), "usage": none})
    campaign = (*CAMPAIGN, "--evaluation-profile", "ev")
    built = run_here(ws.root, "build", *campaign)  # (prepares what the queries read: in this process)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built
    runs = _read(ws.root, "query", "select model_id, input_tokens, cost_usd, cost_source from runs order by model_id",
                 "--format", "json")
    assert runs == [{"model_id": "free", "input_tokens": None, "cost_usd": 0.0, "cost_source": "priced"}] * 2 + [
        {"model_id": "garbled", "input_tokens": None, "cost_usd": None, "cost_source": "unknown"}] * 2 + [
        {"model_id": "paid", "input_tokens": None, "cost_usd": None, "cost_source": "unknown"}] * 2, runs
    judged = _read(ws.root, "query", "select distinct input_tokens, cost_usd, cost_source from judgements",
                   "--format", "json")
    assert judged == [{"input_tokens": None, "cost_usd": 0.0, "cost_source": "priced"}], judged
