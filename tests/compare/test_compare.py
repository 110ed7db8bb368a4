"""`claw compare`: deltas with judge noise between real builds against a noisy stand-in judge."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clawstore.compare import render_comparison
from clawstore.compare.delta import compare_sides, noise_of
from clawstore.compare.scores import SideScores
from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.support.bootstrap import textbook_interval
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, noisy_judge, standin_workspace_once, worse_m1_workspace
from tests.support.workspace import Workspace

CASES = [f"c{i}" for i in range(6)]  # + alpha and beta of the standard workspace
DEGRADED = {"alpha", *CASES[::2]}  # half the 8 cases (alpha asks "What is 2 + 2?")
GATE = ("--fail-on-regression", "--confidence", "0.99")  # a CI gate: at most ~1% false alarms


@dataclass
class Builds:
    claw: Claw
    seed1: str  # pin of campaign main with judge seed 1
    seed2: str  # campaign main rebuilt with judge seed 2 (same runs, every judgement asked again)
    worse: str  # campaign other: m1 replaced by a model that answers worse on half the cases


def _make_builds(standin: StandIn, ws: Workspace, claw: Claw, made: Path) -> None:
    worse_m1_workspace(ws, standin, CASES, DEGRADED)  # B's m1 answers worse on half the cases
    eval_profile(ws, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                              "request_options": {"seed": 1}}])
    noisy_judge(standin, seed=11)
    main = build(claw)
    claw("pin", "seed1", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    worse = build(claw, suite="other")
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0]["request_options"].update(seed=2))
    before = len(standin.requests)
    assert build(claw) == main
    assert sum(1 for r in standin.requests[before:] if r["model"] == JUDGE) == 96  # all re-judged
    (made / "campaigns.json").write_text(json.dumps({"seed2": main, "worse": worse}))


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builds]:
    """Built once in the run (each build sends ~130 requests one at a time), copied for the module."""
    with standin_workspace_once(tmp_path_factory, "compare", _make_builds) as (claw, made):
        campaigns = json.loads((made / "campaigns.json").read_text())
        yield Builds(claw, "seed1", campaigns["seed2"], campaigns["worse"])

def build(claw: Claw, suite: str = "main") -> str:
    code, out, err = claw("build", "--suite", suite, "--run-profile", "rp", "--evaluation-profile", "ev",
                          "--output", "json")
    assert code == 0, err
    return json.loads(out)["campaign"]


def compare(claw: Claw, a: str, b: str, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = claw("compare", a, b, "--output", "json", *extra)
    assert out, err
    return code, json.loads(out)


def test_identical_configs_with_another_judge_seed_are_within_noise(builds: Builds) -> None:
    code, out = compare(builds.claw, builds.seed1, builds.seed2, *GATE)
    deltas = [c["delta"] for c in out["cases"]]
    print(f"judge seed 1 vs 2: {len(deltas)} case deltas in [{min(deltas):+.2f}, {max(deltas):+.2f}], "
          f"widest interval {max(c['high'] - c['low'] for c in out['cases']):.2f}")
    assert code == 0
    assert len(out["cases"]) == 16 and any(d != 0 for d in deltas)  # the judge really was noisy
    assert {c["verdict"] for c in out["cases"]} == {"within noise"}
    assert {m["verdict"] for m in out["models"]} == {"within noise"}


def test_a_model_two_points_worse_on_half_the_cases_is_flagged_exactly_there(builds: Builds) -> None:
    code, out = compare(builds.claw, builds.seed1, builds.worse, *GATE)
    # These 8 cases got worse beyond the judge's noise (regressed_models), but 8 cases cannot tell whether
    # the model is worse beyond them: the gate's paired interval over cases holds 0 (the exact sign-flip
    # test of 4 cases down 2 points and 4 unchanged gives p of about 0.1), so the gate passes.
    assert code == 0 and out["regressed_models"] == ["m1"] and out["gate_failed"] == []
    m1 = next(p for p in out["paired"] if p["model_id"] == "m1")
    assert m1["delta"] < -0.5 and m1["low"] < -0.5 < 0 < m1["high"] and m1["p_value"] > 0.05 and m1["mde"] > 1
    flagged = {(c["model_id"], c["case_id"]) for c in out["cases"] if c["verdict"] != "within noise"}
    assert flagged == {("m1", case) for case in DEGRADED}
    assert all(c["verdict"] == "regressed" for c in out["cases"] if (c["model_id"], c["case_id"]) in flagged)
    print("degraded cases: " + ", ".join(f"{c['case_id']} {c['delta']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}]"
                                         for c in out["cases"] if (c["model_id"], c["case_id"]) in flagged))
    code, _ = compare(builds.claw, builds.seed1, builds.worse)  # without the flag: reported, exit 0
    assert code == 0


def test_text_and_markdown_name_the_verdicts(builds: Builds) -> None:
    code, out, _ = builds.claw("compare", builds.seed1, builds.worse)
    assert code == 0 and "regressed" in out and "(all cases)" in out and "regressed models: m1" in out
    deltas = out.split("\n\n")[0]  # the per-case table and its lines (the paired table follows)
    listed = {tuple(line.split()[:2]) for line in deltas.splitlines()[2:] if line.startswith("m")}
    assert listed == {("m1", "(all"), ("m2", "(all"), *(("m1", case) for case in DEGRADED)}  # the others: within
    assert "(the others are not listed: --all-cases)" in out
    code, out, _ = builds.claw("compare", builds.seed1, builds.worse, "--all-cases")
    assert code == 0 and sum(line.startswith("m") for line in out.split("\n\n")[0].splitlines()) == 2 + 16
    assert "not listed" not in out and "no noise measured" not in out
    code, out, _ = builds.claw("compare", builds.seed1, builds.worse, "--output", "markdown")
    assert code == 0 and out.startswith("| MODEL | CASE |") and "- 4 of 16 case deltas beyond the noise" in out


def test_an_unknown_side_is_one_line_and_exit_2(ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    code, _, err = claw("compare", "nope", "pins/nope")
    assert code == 3 and err.count("\n") == 1, err  # no store there yet: a store error
    Store(Path(env["CLAW_STORE"]))
    code, _, err = claw("compare", "nope", "pins/nope")
    assert code == 2 and err.startswith("claw: error: compare: 'nope' names no campaign") and err.count("\n") == 1


def test_a_campaign_without_repetitions_is_said_to_have_no_measured_noise() -> None:
    cases = {f"c{i:03d}": {0: [5.0]} for i in range(400)}
    a = SideScores("a", "blake3:a", "x", {"m": cases, "n": cases})
    b = SideScores("b", "blake3:b", "x", {"m": {**cases, "c007": {0: [6.0]}}, "n": cases})
    result = compare_sides(a, b, samples=200)
    assert result.unmeasured == ["m", "n"] and result.to_json()["noise_unmeasured"] == ["m", "n"]
    text = render_comparison(result, "text")
    # One case in 400 moved the model's mean by 0.0025: shown as such, not as a +0.00 that "improved".
    assert text.splitlines()[2].split() == ["m", "(all", "cases)", "5.00", "5.00", "+0.0025", "[+0.0025,", "+0.0025]",
                                           "improved"]
    assert "no noise measured for m, n: one run and one judgement per case" in text
    assert len(text.split("\n\nMODEL ")[0].splitlines()) == 2 + 3 + 1 + 3  # header, the two models and c007, a blank
    # line, 3 lines; then the paired table: a one-case move in 400 is no regression and no evidence of one
    paired = {p["model_id"]: p for p in result.to_json()["paired"]}
    assert paired["m"]["delta"] == 0.0025 and paired["m"]["verdict"] == "within noise" and not result.gate_failures
    noisy = SideScores("a", "blake3:a", "x", {"m": {case: {0: [5.0, 5.0]} for case in cases}})
    assert compare_sides(noisy, noisy, samples=200).unmeasured == []  # (two judges that agree: noise 0, measured)


def test_a_case_flagged_on_samples_too_few_for_its_tail_is_drawn_again() -> None:
    # 2,000 cases judged twice, the judges a quarter point apart here and there: Bonferroni puts each
    # case's tail at 1.25e-5. Both judges 7.5 on one side and 6.5 on the other: a delta the bootstrap
    # noise reaches with probability 2.7e-3 (convolving these pools exactly), far inside the tail, yet
    # 100 samples reach it one time in four. A real 3-point drop is beyond any noise the pools can draw.
    wobble = [0.0, 0.25, -0.25, 0.5, -0.5]
    cases = {f"c{i:04d}": {0: [7.0 + wobble[i % 5], 7.0 + wobble[(i * 3) % 5]]} for i in range(2000)}
    a = SideScores("a", "blake3:a", "x", {"m": {**cases, "extreme": {0: [7.5, 7.5]}, "drop": {0: [7.0, 7.0]}}})
    b = SideScores("b", "blake3:b", "x", {"m": {**cases, "extreme": {0: [6.5, 6.5]}, "drop": {0: [4.0, 4.0]}}})
    for seed in range(3):
        verdicts = {d.case_id: d.verdict for d in compare_sides(a, b, samples=100, seed=seed).cases}
        assert verdicts["extreme"] == "within noise" and verdicts["drop"] == "regressed"
        assert list(verdicts.values()).count("within noise") == 2001


def test_without_any_noise_only_a_real_change_is_flagged() -> None:
    a = SideScores("a", "blake3:a", "x", {"m": {"same": {0: [7.0, 7.0]}, "moved": {0: [7.0, 7.0]}}})
    b = SideScores("b", "blake3:b", "x", {"m": {"same": {0: [7.0, 7.0]}, "moved": {0: [6.5, 6.5]}},
                                         "new": {"c": {0: [1.0]}}})
    result = compare_sides(a, b, samples=200)
    verdicts = {d.case_id: (d.verdict, d.low, d.high) for d in result.cases}
    assert verdicts == {"same": ("within noise", 0.0, 0.0), "moved": ("regressed", -0.5, -0.5)}
    # (scored: a model with runs but no successful judgement on one side, a runs-only campaign's, was said to be "only
    # in A", as if B had not run it; s60-qa)
    assert result.unmatched == ["model new scored only in B"]
    a.scores["m"]["gone"] = {0: [5.0]}
    assert compare_sides(a, b, samples=200).unmatched == ["model new scored only in B", "m/gone scored only in A"]


def _noisy_side(rng: random.Random, shift: dict[str, float]) -> SideScores:
    cases = {f"c{i}": {rep: [7.0 + shift.get(f"c{i}", 0.0) + rng.choice([-0.5, -0.25, 0.0, 0.25, 0.5])
                             for _ in range(3)] for rep in range(2)} for i in range(8)}
    return SideScores("x", "blake3:x", "x", {"m1": cases, "m2": cases})


def test_false_alarms_stay_near_the_confidence_level_and_real_drops_are_found() -> None:
    rng = random.Random(5)
    trials = 60
    alarms = sum(bool([d for d in compare_sides(_noisy_side(rng, {}), _noisy_side(rng, {}), samples=800,
                                                seed=i).cases if d.verdict != "within noise"])
                 for i in range(trials))
    found = sum({d.case_id for d in compare_sides(_noisy_side(rng, {}), _noisy_side(rng, {"c1": -2.0, "c5": -2.0}),
                                                  samples=800, seed=i).cases if d.verdict == "regressed"}
                == {"c1", "c5"} for i in range(20))
    print(f"false alarms {alarms}/{trials} at 95%; 2-point drops found exactly {found}/20")
    assert alarms <= 0.15 * trials and found == 20


def test_the_batched_bootstrap_agrees_with_the_textbook_one() -> None:
    # compare_sides draws a pool's residuals for all samples at once and sums them element-wise (a
    # 10,000-case campaign took minutes one residual at a time); its intervals must be the textbook
    # bootstrap's, up to the Monte Carlo error (0.02 between seeds at 20,000 samples).
    rng = random.Random(3)

    def side(shift: dict[str, float]) -> dict[str, dict[int, list[float]]]:
        return {f"c{i}": {rep: [7.0 + shift.get(f"c{i}", 0.0) + rng.choice([-0.5, -0.25, 0.0, 0.25, 0.5])
                                for _ in range(3)] for rep in range(2)} for i in range(4)}

    a, b = side({}), side({"c1": -1.0})
    result = compare_sides(SideScores("a", "blake3:a", "x", {"m": a}), SideScores("b", "blake3:b", "x", {"m": b}),
                           samples=20_000, seed=1)
    case_confidence = 1 - 0.05 / 4
    for delta in result.cases:
        low, high = textbook_interval(a[delta.case_id], b[delta.case_id], noise_of(a), noise_of(b),
                                       random.Random(2), 20_000, case_confidence)
        assert abs(delta.low - low) < 0.06 and abs(delta.high - high) < 0.06, (delta, low, high)
    assert {d.case_id: d.verdict for d in result.cases} == {"c0": "within noise", "c1": "regressed",
                                                            "c2": "within noise", "c3": "within noise"}


def test_more_samples_than_a_million_are_refused_at_once(ws: Workspace, claw: Claw) -> None:
    # Each case's samples are held in memory: 10**12 of them would exhaust it before saying anything.
    code, _, err = claw("compare", "x", "y", "--samples", str(10**12))
    assert code == 2 and "--samples" in err and "1000000" in err, err


@pytest.mark.parametrize("option, value", [("--confidence", "nan"), ("--margin", "nan"), ("--margin", "inf")])
def test_a_confidence_or_margin_that_is_no_finite_number_is_refused(builds: Builds, option: str, value: str) -> None:
    """`nan` passes click's FloatRange: as --confidence it was a traceback (ValueError in the bootstrap's interval),
    as --margin a gate that never failed, whatever B lost (exit 0); so was --margin inf (session 72)."""
    code, out, err = builds.claw("compare", builds.seed1, builds.worse, "--fail-on-regression", option, value)
    assert code == 2 and f"invalid value for '{option}'" in err and "finite" in err and out == "", (code, err)
