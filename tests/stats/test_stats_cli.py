"""Intervals, pass@k, judge reliability and the paired gate end to end: real builds against the stand-in
provider with a noisy judge, read back through `claw report`, `claw query` and `claw compare`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from clawstore.stats.intervals import mean_interval, wilson
from clawstore.testing.standin import StandIn
from tests.compare.test_compare import build
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, noisy_judge, standin_workspace_once, worse_m1_workspace
from tests.support.workspace import Workspace

CASES = [f"c{i}" for i in range(22)]  # + alpha and beta of the standard workspace
DEGRADED = {"alpha", *CASES[::2]}
CAMPAIGN = "main__rp__ev"


@dataclass
class World:
    claw: Claw
    worse: str  # m1 answers worse on half the cases (2 points lower)


def _make_world(standin: StandIn, ws: Workspace, claw: Claw, made: Path) -> None:
    worse_m1_workspace(ws, standin, CASES, DEGRADED)
    eval_profile(ws, threshold=0.7, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE,
                                             "retries": 0, "request_options": {"seed": 1}}])
    noisy_judge(standin, seed=5, replies=1000)
    assert build(claw) == CAMPAIGN
    (made / "worse").write_text(build(claw, suite="other"))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """24 cases × 2 models, 2 run × 3 judge repetitions, the judge scoring 7 ± 0.5 (5 ± 0.5 the worse answer);
    pass threshold 7. Built once in the run, copied for the module."""
    with standin_workspace_once(tmp_path_factory, "stats", _make_world) as (claw, made):
        yield World(claw, (made / "worse").read_text())

def run_json(claw: Claw, *args: str) -> Any:
    code, out, err = claw(*args)
    assert code == 0, err
    return json.loads(out)


def query(claw: Claw, name: str, *params: str) -> list[dict[str, Any]]:
    return run_json(claw, "query", name, "--format", "json", *params)


def test_report_intervals_are_over_cases_and_match_the_sql(world: World) -> None:
    report = run_json(world.claw, "report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                      "--output", "json")
    board = {r["model_id"]: r for r in query(world.claw, "leaderboard", "--param", f"campaign={CAMPAIGN}")}
    dims = {(r["model_id"], r["dimension"]): r for r in query(world.claw, "dimension_scores")
            if r["campaign_id"] == CAMPAIGN}
    for model in report["models"]:
        rows = [r for r in report["rows"] if r["model_id"] == model["model_id"]]
        expected = mean_interval([r["score"] for r in rows])
        assert expected is not None and expected.low is not None and expected.high is not None
        got = model["score_interval"]
        assert got["n"] == 24 and got["mean"] == pytest.approx(expected.mean, abs=1e-6)  # a case counts once, not 2 × 3
        assert got["low"] == pytest.approx(expected.low, abs=1e-6)
        assert got["high"] == pytest.approx(expected.high, abs=1e-6)
        assert expected.low < expected.mean < expected.high  # the judge's noise gives the case scores a spread
        sql = board[model["model_id"]]
        assert (sql["score_low"], sql["score_high"]) == (pytest.approx(got["low"], abs=6e-4),
                                                         pytest.approx(got["high"], abs=6e-4))
        passes = wilson(sum(r["passed"] for r in rows), len(rows))
        assert passes is not None and model["pass_rate_interval"]["low"] == pytest.approx(passes.low, abs=1e-6)
        assert (sql["pass_low"], sql["pass_high"]) == (pytest.approx(passes.low, abs=6e-4),
                                                       pytest.approx(passes.high, abs=6e-4))
        task = model["dimension_intervals"]["task"]
        assert (dims[(model["model_id"], "task")]["low"], dims[(model["model_id"], "task")]["n"]) == (
            pytest.approx(task["low"], abs=6e-4), task["n"])
        k = model["pass_k"]
        assert k["k"] == 2 and k["pass_at_k"]["n"] == 24 and k["pass_at_k"]["mean"] >= k["pass_all_k"]["mean"]
    at_k = {r["model_id"]: r for r in query(world.claw, "pass_at_k", "--param", f"campaign={CAMPAIGN}")}
    assert {m: r["pass_all_k"] for m, r in at_k.items()} == {
        m["model_id"]: pytest.approx(m["pass_k"]["pass_all_k"]["mean"], abs=6e-4) for m in report["models"]}


def test_judge_reliability_in_the_report_and_in_sql(world: World) -> None:
    report = run_json(world.claw, "report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                      "--output", "json")
    overall = next(j for j in report["judge_reliability"] if j["dimension"] == "overall")
    # 2 models × 24 cases × 2 runs, each judged 3 times by a judge wobbling by up to ±0.5 around 7
    assert (overall["judge_repetitions"], overall["runs"]) == (3, 96)
    assert 0.1 < overall["mad"] < 1.0 and 0 < overall["flip_share"] < 1
    sql = {r["dimension"]: r for r in query(world.claw, "judge_reliability") if r["campaign_id"] == CAMPAIGN}
    assert sql["overall"]["mean_abs_diff"] == pytest.approx(overall["mad"], abs=6e-4)
    assert sql["overall"]["icc"] == pytest.approx(overall["icc"], abs=6e-4)
    assert sql["overall"]["verdict_flips"] == pytest.approx(overall["flip_share"], abs=6e-4)
    code, out, err = world.claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert code == 0, err
    lines = out.splitlines()
    stats = lines.index("Model Statistics (95% intervals over cases: scores t, pass rates Wilson)")
    assert lines[stats + 1].split() == ["MODEL", "N", "MEAN_SCORE", "SCORE_95CI", "PASS_RATE", "PASS_95CI", "PASS@2",
                                        "95CI", "PASS^2", "95CI"]
    assert "Judge Reliability (its repetitions of the same run)" in lines


def test_compare_pairs_cases_gates_on_the_interval_and_lists_flips(world: World) -> None:
    code, out, err = world.claw("compare", CAMPAIGN, world.worse, "--output", "json", "--fail-on-regression")
    assert code == 1, err
    data = json.loads(out)
    paired = {p["model_id"]: p for p in data["paired"]}
    assert data["gate_failed"] == ["m1", "(all models)"] and paired["m1"]["verdict"] == "regressed"
    assert paired["m1"]["n"] == 24 and paired["m1"]["high"] < 0 and paired["m1"]["p_value"] < 0.01
    assert paired["m2"]["verdict"] == "within noise" and paired["m2"]["delta"] == 0  # its records reused: same scores
    flipped = {(f["model_id"], f["case_id"]): f for f in data["flipped"]}
    report = run_json(world.claw, "report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                      "--output", "json")
    passed_a = {r["case_id"] for r in report["rows"] if r["model_id"] == "m1" and r["passed"]}
    # every degraded case that passed on A fails on B (5 ± 0.5 never reaches 7), and is listed as flipped
    assert passed_a & DEGRADED and {c for (m, c), f in flipped.items() if not f["passed_b"]} >= passed_a & DEGRADED
    assert {j["side"] for j in data["judge_noise"]} == {"A", "B"}
    # the same drop within a margin of 3 points does not fail the gate, and is said to be no regression
    code, out, _ = world.claw("compare", CAMPAIGN, world.worse, "--output", "json", "--fail-on-regression",
                              "--margin", "3")
    assert code == 0 and json.loads(out)["gate_failed"] == []
    # a campaign against itself: nothing fails; text names the gate and the judge noise
    code, out, _ = world.claw("compare", CAMPAIGN, CAMPAIGN, "--fail-on-regression")
    assert code == 0 and "--fail-on-regression fails on: none (margin 0)" in out
    assert "judge noise, side A, m1, judge main: mean |difference| between repetitions" in out
    sql = {r["model_id"]: r for r in query(world.claw, "paired_compare", "--param", f"a={CAMPAIGN}",
                                           "--param", f"b={world.worse.split('/')[-1]}")}
    # (the SQL pairs final scores, as `claw report`; `claw compare` the mean of the judge scores: with the median
    # of three judges as the final score, the two differ by a few hundredths)
    assert sql["m1"]["delta"] == pytest.approx(paired["m1"]["delta"], abs=0.05) and sql["m1"]["high"] < 0


def test_view_shows_intervals_the_paired_comparison_and_the_judge(world: World, browser: Any, tmp_path: Path
                                                                 ) -> None:
    """`claw view --against`: A is the campaign, B the worse one; screenshots to $CLAW_SCREENSHOTS (stats-*.png)."""
    html = tmp_path / "view.html"
    code, _, err = world.claw("view", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                              "--against", world.worse, "--out", str(html))
    assert code == 0, err
    report = run_json(world.claw, "report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                      "--output", "json")
    compared = run_json(world.claw, "compare", CAMPAIGN, world.worse, "--output", "json")
    browser.set_window_size(1400, 1100)
    browser.get(html.as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr[data-campaign='0']")
    shown = {r.get_attribute("data-model"): r for r in rows}
    for model in report["models"]:
        cell = shown[model["model_id"]].find_element(By.CSS_SELECTOR, "td[data-col='score_interval']").text
        iv = model["score_interval"]
        assert cell == f"[{iv['low']:.2f}, {iv['high']:.2f}] n=24"
    dims = browser.find_elements(By.CSS_SELECTOR, "#dimension-stats tbody tr[data-campaign='0']")
    for model in report["models"]:  # per-dimension intervals and pass@k, as the report's JSON has them
        row = next(r for r in dims if r.get_attribute("data-model") == model["model_id"])
        for dimension, iv in model["dimension_intervals"].items():
            cell = row.find_element(By.CSS_SELECTOR, f"td[data-col='dim-{dimension}']").text
            assert cell == f"{iv['mean']:.2f}\n[{iv['low']:.2f}, {iv['high']:.2f}] n={iv['n']}", (dimension, cell)
        at_k = model["pass_k"]["pass_at_k"]
        cell = row.find_element(By.CSS_SELECTOR, "td[data-col='pass_at_k']").text
        assert cell.startswith(f"{100 * at_k['mean']:.0f}%\n[{100 * at_k['low']:.0f}%, ")
    paired = {r.get_attribute("data-model"): r.text for r in browser.find_elements(By.CSS_SELECTOR, "#paired tbody tr")}
    m1 = next(p for p in compared["paired"] if p["model_id"] == "m1")
    assert paired["m1"].split()[:4] == ["m1", "B", "24", f"{m1['delta']:+.2f}"]  # the report's final scores: close
    assert paired["m1"].endswith("regressed") and paired["m2"].endswith("within noise")
    judges = browser.find_elements(By.CSS_SELECTOR, "#judge-reliability tbody tr")
    assert len(judges) == 2  # one judge plan on each side
    shots = Path(os.environ.get("CLAW_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(shots / "stats-leaderboard.png"))
    browser.execute_script("document.getElementById('paired').scrollIntoView()")
    browser.save_screenshot(str(shots / "stats-compare.png"))
