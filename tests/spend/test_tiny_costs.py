"""A known cost never prints as zero: a cheap or self-hosted model with a price set costs fractions of a cent, and a
run of ~1e-9 USD printed `0.00000` (the report, the view), `0.000000 USD` (the build, its progress, the plan, the
--max-cost refusal) or `1.2e-09` (`claw query`'s table): read as free. A cost below 5e-11 USD rounded to 0.0 in JSON."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from clawstore.testing.standin import StandIn, text
from clawstore.values.costs import CostSum, shown_usd
from tests.spend.test_cost_sources import CAMPAIGN, NO_COST, build_line, surfaces
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

CHEAP = {"input": 0.0001, "output": 0.0001}  # USD per 1M tokens: a run of a few words costs ~1e-9 USD
NUMBER = r"≥?([0-9]+\.[0-9]+)"  # a cost as text shows it: positional, never `1.2e-09`


def shown(match: re.Match[str] | None, true: float) -> float:
    """The cost a text shows, checked to be the true one (not 0, not another) to the digits it shows."""
    assert match is not None
    value = float(match.group(1))
    assert value == pytest.approx(true, rel=0.05), (match.group(0), true)
    return value


def cheap(ws: Workspace, standin: StandIn) -> None:
    """2 models x 2 cases, a judge repetition each, every request priced at CHEAP (the server reports no cost)."""
    eval_profile(ws, repetitions=1)
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=CHEAP) for m in d["models"]])
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing=CHEAP))
    standin.script(JUDGE, {**judge_reply(7), "usage": NO_COST})
    standin.script("*", text("four", usage=NO_COST))


def test_a_known_cost_of_a_fraction_of_a_cent_never_prints_as_zero(ws: Workspace, claw: Claw,
                                                                   standin: StandIn) -> None:
    cheap(ws, standin)
    seen = surfaces(claw)
    runs, judgements = seen["runs"], seen["judgements"]
    spent = sum(r["cost_usd"] for r in runs + judgements)
    assert 0 < max(r["cost_usd"] for r in runs + judgements) < 1e-6 and spent < 5e-7  # (5 and 6 decimals: zero)

    shown(re.search(rf"cost spent {NUMBER} USD \(8 of 8 priced\)$", build_line(seen["build"])), spent)
    run = runs[0]
    row = next(line for line in seen["build"].splitlines() if re.match(rf" *{run['model_id']} +{run['case_id']} ",
                                                                       line))
    shown(re.fullmatch(NUMBER, row.split()[6]), run["cost_usd"])  # (MODEL CASE REP RUN STATUS LATENCY_S COST ...)
    last = [line for line in seen["progress"].splitlines() if " · spent " in line][-1]
    shown(re.search(rf"· spent {NUMBER} USD \(8 of 8 priced\)$", last), spent)
    shown(re.search(rf"total {NUMBER} \(8 of 8 priced\)", seen["report"]), spent)
    for model in seen["view"]["models"]:
        shown(re.match(rf"{NUMBER} \(4 of 4 priced\)$", model["total_cost_text"]), model["total_cost_usd"])
    shown(re.search(rf"estimated cost {NUMBER} USD \(8 of 8 priced\)", seen["plan"]), spent)

    code, out, err = claw("query", "select cost_usd from runs order by cost_usd desc limit 1")
    assert code == 0, err
    shown(re.search(rf"^ *{NUMBER} *$", out, re.M), max(r["cost_usd"] for r in runs))
    code, out, err = claw("build", *CAMPAIGN, "--force", "--max-cost", "1e-9")
    assert code == 2
    shown(re.search(rf"estimated cost {NUMBER} USD exceeds --max-cost 1e-09 USD", err), spent)


def test_the_view_shows_a_cost_of_a_fraction_of_a_cent_in_chromium(ws: Workspace, claw: Claw, standin: StandIn,
                                                                   browser: Any) -> None:
    """view.js's own cost text (a run's page: run, evaluation and judgement costs; the chart's axis), not Python's."""
    cheap(ws, standin)
    assert claw("build", *CAMPAIGN)[0] == 0
    code, _, err = claw("view", *CAMPAIGN, "--out", "view.html")
    assert code == 0, err
    code, out, err = claw("query", "select cost_usd from runs where model_id = 'm1' and case_id = 'alpha'",
                          "--format", "json")
    assert code == 0, err
    run_cost = json.loads(out)[0]["cost_usd"]
    assert 0 < run_cost < 5e-7
    browser.get((claw.root / "view.html").as_uri() + "#case/alpha/model/m1")
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "run-title"))
    body = browser.find_element(By.ID, "main").text
    shown(re.search(rf"run cost \(USD\)\s*{NUMBER} \(priced\)", body, re.I), run_cost)  # (labels in capitals)
    for label in (r"evaluation cost \(USD\)\s*", r"judge/j1 · overall 7\.00 · success · cost "):
        judged = re.search(label + NUMBER, body, re.I)
        assert judged is not None and float(judged.group(1)) > 0, body
    browser.get((claw.root / "view.html").as_uri())
    ticks = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#chart > text") if t.text.startswith("$")]
    assert len(ticks) == 5 and ticks[0] == "$0", ticks
    assert all(re.fullmatch(r"\$0\.[0-9]+", t) and float(t[1:]) > 0 for t in ticks[1:]), ticks  # (not 2.5e-7)


def test_a_cost_below_the_json_decimals_is_not_rounded_to_zero(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    each = 3e-12  # a reported cost past JSON's 10 decimals (USD_DIGITS)
    standin.script("*", text("four", usage={"cost": each}))
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0, err
    assert json.loads(out)["metrics"]["cost_usd"] == pytest.approx(4 * each)
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--no-chart", "--output", "json")
    assert code == 0, err
    assert json.loads(out)["totals"]["total_cost_usd"] == pytest.approx(4 * each)
    code, out, err = claw("query", "select cost_usd from builds", "--format", "json")
    assert code == 0 and json.loads(out)[0]["cost_usd"] == pytest.approx(4 * each), out + err
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", "--force")
    assert code == 0, err
    shown(re.search(rf"cost spent {NUMBER} USD$", build_line(out)), 4 * each)


def test_the_formatter_keeps_fixed_decimals_when_they_show_the_cost() -> None:
    from clawstore.values.costs import usd  # (one formatter for every cost as text)

    assert [usd(v) for v in (0.0, 0.0123, 1.5, 0.00001)] == ["0.00000", "0.01230", "1.50000", "0.00001"]
    assert [usd(v) for v in (1.2e-6, 4.4e-7, 3e-12)] == ["0.0000012", "0.00000044", "0.000000000003"]
    assert usd(1.2e-6, 6) == "0.000001" and usd(4.9e-7, 6) == "0.00000049" and usd(-0.0) == "0.00000"
    assert "e" not in usd(1e-15) and float(usd(1e-15)) == 1e-15 and float(usd(1e-30)) == 1e-30
    assert CostSum.of(1.2e-6, "priced").text() == "0.0000012 (1 of 1 priced)"
    assert (CostSum.of(2e-7) + CostSum.of(None)).cell(6) == "≥0.0000002"
    assert CostSum.of(None).cell() == "?" and CostSum.of(0.0).usd_text() == "0.000000 USD"
    assert shown_usd(3e-12) == 3e-12 and shown_usd(0.1 + 0.1 + 0.1) == 0.3 and shown_usd(0.0) == 0.0
    assert CostSum.total([CostSum.of(0.1)] * 10).known_usd == 1.0  # (a plain sum of ten 0.1: 0.9999999999999999)


def test_the_messages_built_apart_say_a_tiny_cost_too() -> None:
    """The texts made outside CostSum: a killed build's note, the live display's spend, --max-cost with batch lines
    pending (each wrote `:.6f` itself: 0.000000)."""
    from clawstore.builder.progress_live import _spent
    from clawstore.builder.session import Budget
    from clawstore.spend.killed import KilledBuild

    tiny = CostSum.of(2e-9, "priced")
    assert "spent ≥0.000000002 USD (1 of 1 priced)" in KilledBuild("b1", 1, tiny).note()
    assert _spent(tiny) == "$0.000000002 (1 of 1 priced)" and _spent(CostSum.of(0.0123)) == "$0.0123"
    budget = Budget(1e-9, lambda: tiny.build_metrics())
    budget.committed["k"] = 3e-9
    budget.note_skips()
    assert budget.reason is not None and " and 0.000000003 USD estimated for batch lines" in budget.reason
