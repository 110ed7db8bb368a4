"""The plain views hold each campaign as it stands, so the leaderboard says what `claw report` says —
after layered changes (expectations, judge repetitions, aggregation) and a `--force` rebuild."""

from __future__ import annotations

import json
from typing import Any

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

CASES = ("alpha", "beta", "gamma", "delta", "eps")
CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
CAMPAIGN_ID = "main__rp__ev"


def query(claw: Claw, *args: str) -> list[dict[str, Any]]:
    code, out, err = claw("query", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def report(claw: Claw) -> dict[str, Any]:
    code, out, err = claw("report", *CAMPAIGN, "--output", "json", "--no-chart")
    assert code == 0, err
    return json.loads(out)


def assert_leaderboard_is_report(claw: Claw) -> dict[str, Any]:
    board = {row["model_id"]: row for row in query(claw, "leaderboard", "--param", f"campaign={CAMPAIGN_ID}")}
    shown = report(claw)
    assert sorted(board) == sorted(m["model_id"] for m in shown["models"])
    for model in shown["models"]:
        row = board[model["model_id"]]
        assert row["campaign_id"] == CAMPAIGN_ID
        assert row["cases"] == model["cases"] == len(CASES)
        assert row["scored"] == model["scored"]
        # Agree to the printed decimals (SQL and Python may round a tie differently in the last one).
        assert abs(row["mean_score"] - model["mean_score"]) <= 0.0005 + 1e-9
        for cost in ("run_cost_usd", "eval_cost_usd", "total_cost_usd"):
            assert abs(row[cost] - model[cost]) <= 0.000005 + 1e-12, cost
        assert abs(row["mean_latency_s"] - model["mean_latency_s"]) <= 0.005 + 1e-9
    # Plain views: exactly one result per (model, case) of the head; the history keeps every build's.
    assert query(claw, f"select count(*) as n from results where campaign_id = '{CAMPAIGN_ID}'") == [{"n": 10}]
    return shown


def test_leaderboard_equals_report_after_layered_changes(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    for case in CASES[2:]:
        ws.case(case, f"Question {case}?")
    # Varied judge scores, so medians, means and repetition counts all move the numbers.
    standin.script(JUDGE, *(judge_reply(float(2 + (i * 7) % 8)) for i in range(400)))
    eval_profile(ws, repetitions=3)
    assert claw("build", *CAMPAIGN)[0] == 0
    first = assert_leaderboard_is_report(claw)

    ws.edit("cases/gamma/test.yaml",
            lambda d: d["expectations"]["hard_expectations"].append({"text": "Shows the working."}))
    assert claw("build", *CAMPAIGN)[0] == 0
    assert_leaderboard_is_report(claw)

    eval_profile(ws, repetitions=4)
    assert claw("build", *CAMPAIGN)[0] == 0
    assert_leaderboard_is_report(claw)

    eval_profile(ws, repetitions=4, method="mean")
    assert claw("build", *CAMPAIGN)[0] == 0
    assert_leaderboard_is_report(claw)

    assert claw("build", *CAMPAIGN, "--force")[0] == 0
    last = assert_leaderboard_is_report(claw)
    assert first["head"]["object"] != last["head"]["object"]
    history = query(claw, f"select count(*) as n from result_history where campaign_id = '{CAMPAIGN_ID}'")
    assert history[0]["n"] > 10  # every superseded result is still there, apart from the plain view


def test_each_campaign_keeps_its_own_rows(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    for case in CASES[2:]:
        ws.case(case, f"Question {case}?")
    standin.script(JUDGE, judge_reply(6))
    eval_profile(ws, repetitions=2)
    ws.suite("small", ["m1"], case_selection={"include_case_ids": ["alpha", "beta"]})
    assert claw("build", *CAMPAIGN)[0] == 0
    assert claw("build", "--suite", "small", "--run-profile", "rp", "--evaluation-profile", "ev")[0] == 0
    counts = query(claw, "select campaign_id, count(*) as n from results group by 1 order by 1")
    assert counts == [{"campaign_id": CAMPAIGN_ID, "n": 10}, {"campaign_id": "small__rp__ev", "n": 2}]
    # The small campaign reused the big one's runs and judgements: nothing was paid twice.
    assert query(claw, "select count(*) as n from runs where action = 'exec'") == [{"n": 10}]
