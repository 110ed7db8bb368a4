"""Unknown cost is never shown as 0. A server that sends no `usage.cost` (vLLM, Ollama, llama.cpp, LiteLLM),
with and without declared `pricing`: every surface that shows a cost says unknown or priced. And
`--max-cost` counts priced cost while the build runs."""

from __future__ import annotations

import html as html_text
import json
import re
from typing import Any

import pytest

from clawstore.testing.standin import StandIn, malformed, text
from clawstore.values.costs import CostSum, known_cost, source_of
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
NO_COST = {"cost": None}  # the stand-in leaves `usage.cost` out of its replies
RUN_PRICES = {"input": 2.0, "output": 8.0}
JUDGE_PRICES = {"input": 1.0, "output": 4.0}


def no_cost_server(ws: Workspace, standin: StandIn, run_prices: bool, judge_prices: bool) -> None:
    """2 models x 2 cases, one judge repetition: 4 runs and 4 judgements, none with a reported cost."""
    eval_profile(ws, repetitions=1)
    if run_prices:
        ws.edit("suites/main.yaml", lambda d: [m.update(pricing=RUN_PRICES) for m in d["models"]])
    if judge_prices:
        ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing=JUDGE_PRICES))
    standin.script(JUDGE, {**judge_reply(7), "usage": NO_COST})
    standin.script("*", text("four", usage=NO_COST))


def surfaces(claw: Claw) -> dict[str, Any]:
    """What each command shows of the cost, after one build."""
    code, build_out, progress = claw("build", *CAMPAIGN, "--progress", "plain")
    assert code == 0, progress
    shown: dict[str, Any] = {"build": build_out, "progress": progress}
    code, shown["report"], err = claw("report", *CAMPAIGN, "--no-chart")
    assert code == 0, err
    code, out, err = claw("report", *CAMPAIGN, "--no-chart", "--output", "json")
    assert code == 0, err
    shown["report_json"] = json.loads(out)
    code, _, err = claw("view", *CAMPAIGN, "--out", "view.html")
    assert code == 0, err
    page = (claw.root / "view.html").read_text()
    summary = re.search(r'<script type="application/json" id="claw-summary">(.*?)</script>', page, re.S)
    assert summary is not None
    shown["view"] = json.loads(html_text.unescape(summary.group(1)))
    for name, sql in (("leaderboard", "leaderboard"), ("runs", "select * from runs"),
                      ("judgements", "select * from judgements"), ("results", "select * from results"),
                      ("builds", "select * from builds")):
        code, out, err = claw("query", sql, "--format", "json")
        assert code == 0, err
        shown[name] = json.loads(out)
    code, shown["plan"], err = claw("plan", *CAMPAIGN, "--force")
    assert code == 0, err
    code, out, err = claw("plan", *CAMPAIGN, "--force", "--output", "json")
    assert code == 0, err
    shown["plan_json"] = json.loads(out)
    return shown


def build_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("build "))


def test_a_server_without_cost_and_no_pricing_shows_unknown_everywhere(ws: Workspace, claw: Claw,
                                                                       standin: StandIn) -> None:
    no_cost_server(ws, standin, run_prices=False, judge_prices=False)
    shown = surfaces(claw)
    assert build_line(shown["build"]).endswith("cost spent ? USD (8 of 8 unknown)")
    assert re.search(r"^ *m1 +alpha .* \? ", shown["build"], re.M)  # the run's COST cell
    assert shown["progress"].splitlines()[0].endswith("· spent ? USD (1 of 1 unknown)")
    assert "Cost (USD): runs ?  evaluation ?  total ? (8 of 8 unknown)" in shown["report"]
    m1 = next(line for line in shown["report"].splitlines() if line.startswith("m1 ") and "unknown:4" in line)
    assert m1.split()[-4:] == ["?", "?", "?", "unknown:4"]
    totals = shown["report_json"]["totals"]
    assert totals == {"run_cost_usd": None, "eval_cost_usd": None, "total_cost_usd": None, "known_cost_usd": 0.0,
                      "cost_sources": {"unknown": 8}}
    assert all(row["total_cost_usd"] is None for row in shown["report_json"]["rows"])
    view = shown["view"]
    assert [(m["total_cost_usd"], m["total_cost_text"]) for m in view["models"]] == [(None, "? (4 of 4 unknown)")] * 2
    assert {row["cost_text"] for row in view["rows"]} == {"? (2 of 2 unknown)"}
    assert [(r["total_cost_usd"], r["cost_priced"], r["cost_unknown"]) for r in shown["leaderboard"]] == \
        [(None, 0, 4)] * 2
    assert {(r["cost_usd"], r["cost_source"]) for r in shown["runs"]} == {(None, "unknown")}
    assert {(r["cost_usd"], r["cost_source"]) for r in shown["judgements"]} == {(None, "unknown")}
    assert {r["total_cost_usd"] for r in shown["results"]} == {None}
    assert [(b["cost_usd"], b["cost_known_usd"], b["cost_unknown"]) for b in shown["builds"]] == [(None, 0.0, 8)]
    assert "estimated cost ? USD (8 of 8 unknown)" in shown["plan"]
    assert shown["plan_json"]["estimated_cost_usd"] is None
    assert shown["plan_json"]["cost_sources"] == {"unknown": 8}


def test_a_server_without_cost_is_priced_from_declared_pricing(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    no_cost_server(ws, standin, run_prices=True, judge_prices=True)
    shown = surfaces(claw)
    runs, judgements = shown["runs"], shown["judgements"]
    for row, prices in [*((r, RUN_PRICES) for r in runs), *((j, JUDGE_PRICES) for j in judgements)]:
        expected = (row["input_tokens"] * prices["input"] + row["output_tokens"] * prices["output"]) / 1e6
        assert row["cost_source"] == "priced" and abs(row["cost_usd"] - expected) < 1e-12, row
    spent = sum(r["cost_usd"] for r in runs + judgements)
    assert spent > 0
    assert build_line(shown["build"]).endswith(f"cost spent {spent:.6f} USD (8 of 8 priced)")
    paid = [line for line in shown["progress"].splitlines() if " · spent " in line]
    assert len(paid) == 8 and paid[-1].endswith(f"· spent {spent:.6f} USD (8 of 8 priced)")
    assert f"total {spent:.5f} (8 of 8 priced)" in shown["report"]
    assert shown["report_json"]["totals"]["total_cost_usd"] == pytest.approx(spent)
    assert shown["report_json"]["totals"]["cost_sources"] == {"priced": 8}
    assert {m["total_cost_text"].split(" ", 1)[1] for m in shown["view"]["models"]} == {"(4 of 4 priced)"}
    assert [(r["cost_priced"], r["cost_unknown"]) for r in shown["leaderboard"]] == [(4, 0)] * 2
    assert abs(sum(r["total_cost_usd"] for r in shown["leaderboard"]) - spent) < 1e-4
    assert abs(sum(r["total_cost_usd"] for r in shown["results"]) - spent) < 1e-12
    assert [(b["cost_priced"], b["cost_unknown"]) for b in shown["builds"]] == [(8, 0)]
    # The plan prices from the declared prices, not from the priced history (a price edit shows at once).
    assert shown["plan_json"]["cost_sources"] == {"priced": 8}
    assert abs(shown["plan_json"]["estimated_cost_usd"] - spent) < 1e-9
    assert "(8 of 8 priced)" in shown["plan"]


def test_a_price_declared_after_the_build_prices_what_is_built_next_not_what_is_stored(ws: Workspace, claw: Claw,
                                                                                      standin: StandIn) -> None:
    """What README and docs/building.md say (Costs): a record's cost is worked out when it is written, and no price is
    in a key, so a `pricing` declared after a build re-runs nothing and leaves the stored costs unknown (`?`), while
    `claw plan` prices with it at once. (A newcomer declaring prices to see what a local server's runs cost.)"""
    no_cost_server(ws, standin, run_prices=False, judge_prices=False)
    assert claw("build", *CAMPAIGN)[0] == 0
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=RUN_PRICES) for m in d["models"]])
    code, out, err = claw("build", *CAMPAIGN)
    assert code == 0 and build_line(out).startswith("build ") and " 0 executed, " in build_line(out), out + err
    code, out, err = claw("report", *CAMPAIGN, "--no-chart")
    assert code == 0 and "Cost (USD): runs ?  evaluation ?  total ? (8 of 8 unknown)" in out, out + err
    code, out, err = claw("plan", *CAMPAIGN, "--force", "--output", "json")
    assert code == 0 and json.loads(out)["cost_sources"] == {"priced": 4, "unknown": 4}, out + err


def test_a_mixed_total_says_which_parts_are_priced_and_unknown(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    no_cost_server(ws, standin, run_prices=True, judge_prices=False)
    shown = surfaces(claw)
    spent = sum(r["cost_usd"] for r in shown["runs"])
    assert build_line(shown["build"]).endswith(f"cost spent ≥{spent:.6f} USD (4 of 8 unknown, 4 of 8 priced)")
    assert f"runs {spent:.5f}  evaluation ?  total ≥{spent:.5f} (4 of 8 unknown, 4 of 8 priced)" in shown["report"]
    totals = shown["report_json"]["totals"]
    assert (totals["eval_cost_usd"], totals["total_cost_usd"]) == (None, None)
    assert abs(totals["run_cost_usd"] - spent) < 1e-12 and abs(totals["known_cost_usd"] - spent) < 1e-12
    assert totals["cost_sources"] == {"priced": 4, "unknown": 4}
    assert [(r["eval_cost_usd"], r["total_cost_usd"], r["cost_priced"], r["cost_unknown"])
            for r in shown["leaderboard"]] == [(None, None, 2, 2)] * 2
    assert [(b["cost_usd"], b["cost_priced"], b["cost_unknown"]) for b in shown["builds"]] == [(None, 4, 4)]


def test_a_pricing_without_an_output_price_leaves_the_cost_unknown_not_output_free(
        ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """`pricing: {input: 2.0}` (what a validate estimate of attachments needs) priced every output token at 0."""
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0}) for m in d["models"]])
    standin.script("*", text("four", usage=NO_COST))
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    assert build_line(out).endswith("cost spent ? USD (4 of 4 unknown)")
    code, out, err = claw("query", "select cost_usd, cost_source from runs", "--format", "json")
    assert code == 0 and json.loads(out) == [{"cost_usd": None, "cost_source": "unknown"}] * 4, err


def test_an_empty_pricing_is_no_pricing_not_a_config_error(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """`pricing:` with its prices commented out is YAML null: no prices declared, as `pricing: {}` is (the repo's rule
    for an empty field), the cost unknown. Session 56's pricing check refused the config (exit 2)."""
    no_cost_server(ws, standin, run_prices=False, judge_prices=False)
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=None) for m in d["models"]])
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing=None))
    code, out, err = claw("validate")
    assert code == 0, out + err
    code, out, err = claw("build", *CAMPAIGN)
    assert code == 0, err
    assert build_line(out).endswith("cost spent ? USD (8 of 8 unknown)")


def test_a_free_model_declared_at_0_is_priced_at_0_everywhere(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """A local model that costs nothing, said so (`pricing: {input: 0, output: 0}`): known to be 0, never unknown."""
    eval_profile(ws, repetitions=1)
    free = {"input": 0, "output": 0}
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=free) for m in d["models"]])
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing={**free, "batch": 0.5}))
    standin.script(JUDGE, {**judge_reply(7), "usage": NO_COST})
    standin.script("*", text("four", usage=NO_COST))
    shown = surfaces(claw)
    assert build_line(shown["build"]).endswith("cost spent 0.000000 USD (8 of 8 priced)")
    assert "total 0.00000 (8 of 8 priced)" in shown["report"]
    assert shown["report_json"]["totals"]["total_cost_usd"] == 0.0
    assert {m["total_cost_text"] for m in shown["view"]["models"]} == {"0.00000 (4 of 4 priced)"}
    assert {(r["cost_usd"], r["cost_source"]) for r in shown["runs"] + shown["judgements"]} == {(0.0, "priced")}
    assert [(b["cost_usd"], b["cost_priced"], b["cost_unknown"]) for b in shown["builds"]] == [(0.0, 8, 0)]
    assert shown["plan_json"]["estimated_cost_usd"] == 0.0


def test_max_cost_counts_priced_cost_and_stops_a_build_that_outgrows_its_plan(ws: Workspace, claw: Claw,
                                                                             standin: StandIn) -> None:
    # One model, 10 cases, one request at a time; the server reports no cost; the model declares prices.
    for i in range(10):
        ws.case(f"c{i}", f"Question {i}?")
    for name in ("alpha", "beta"):
        (ws.configs / "cases" / name / "test.yaml").unlink()
        (ws.configs / "cases" / name).rmdir()
    ws.suite("main", ["m1"])
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing={"input": 1.0, "output": 1000.0}))
    ws.run_profile(concurrency=1)
    short = {"cost": None, "prompt_tokens": 10, "completion_tokens": 100}
    standin.script("*", text("short", usage=short))
    flags = ("--suite", "main", "--run-profile", "rp", "--output", "json")
    code, out, err = claw("build", *flags)
    assert code == 0, err
    assert json.loads(out)["metrics"]["cost_usd"] == pytest.approx(10 * (10 + 100 * 1000) / 1e6)  # priced, not 0

    # The plan (this history's tokens at the declared prices) is for short replies; they come twice as long.
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp", "--force", "--output", "json")
    planned = json.loads(out)
    assert planned["estimated_cost_usd"] == pytest.approx(10 * (10 + 100 * 1000) / 1e6)
    assert planned["cost_sources"] == {"priced": 10}
    standin.reset()
    standin.script("*", text("long", usage={**short, "completion_tokens": 200}))
    limit = round(1.3 * planned["estimated_cost_usd"], 6)
    code, out, err = claw("build", *flags, "--force", "--max-cost", str(limit))
    report = json.loads(out)
    each = (10 + 200 * 1000) / 1e6
    assert code == 1, err
    assert len(standin.requests) == 7  # 6 × 0.20001 < 1.3001 ≤ 7 × 0.20001: the 8th never starts
    assert [r["run"] for r in report["rows"]] == ["exec"] * 7 + ["skip"] * 3
    assert report["metrics"]["cost_usd"] == pytest.approx(7 * each) and report["metrics"]["cost_priced"] == 7
    assert f"--max-cost {limit:g} USD reached (spent {7 * each:.6f} USD (7 of 7 priced))" in report["stopped"]


def test_records_written_before_cost_sources_read_as_reported_or_unknown() -> None:
    assert source_of({"cost_usd": 0.25}) == "reported" and source_of({"cost_usd": None}) == "unknown"
    assert source_of({}) == "unknown" and source_of({"cost_usd": 0.0, "cost_source": "priced"}) == "priced"
    old = CostSum.of_metrics({"cost_usd": 0.25}) + CostSum.of_metrics({"cost_usd": None})
    assert (old.usd, old.known_usd, old.text(2)) == (None, 0.25, "≥0.25 (1 of 2 unknown)")
    assert CostSum.of_build({"cost_usd": 0.5}).text(1) == "0.5"  # an older build log: no counts, all reported


def test_a_cost_that_is_not_a_finite_number_is_unknown_and_never_summed() -> None:
    # A NaN summed in would make every total NaN (neither a number nor unknown); an infinity would swamp it.
    for odd in (float("nan"), float("inf"), float("-inf"), 10**400):  # (an int past a double: a hostile record's)
        assert known_cost(odd) is None and source_of({"cost_usd": odd}) == "unknown"
        total = CostSum.of_metrics({"cost_usd": 0.25}) + CostSum.of_metrics({"cost_usd": odd})
        assert (total.usd, total.known_usd, total.text(2)) == (None, 0.25, "≥0.25 (1 of 2 unknown)")
    assert known_cost(3) == 3.0 and known_cost(True) is None and known_cost("0.5") is None


def test_an_answer_claw_cannot_read_from_a_priced_model_costs_unknown_not_0(ws: Workspace, claw: Claw,
                                                                             standin: StandIn) -> None:
    """A 200 whose body is not an answer was answered, so maybe billed: with declared prices its nothing-read 0
    tokens made a known 0.0 USD, `priced` (unknown shown as zero). Its cost is unknown; the run fails, retried."""
    eval_profile(ws, repetitions=1)
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=RUN_PRICES) for m in d["models"]])
    standin.script("*", malformed())
    code, out, err = claw("build", *CAMPAIGN, "--progress", "plain")
    assert code == 1, (out, err)
    assert "0.000000 USD" not in build_line(out) and "unknown" in build_line(out), build_line(out)
    code, out, err = claw("query", "select cost_usd, cost_source from runs", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows and all((r["cost_usd"], r["cost_source"]) == (None, "unknown") for r in rows), rows
