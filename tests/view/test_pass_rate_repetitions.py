"""What the leaderboard's pass rate counts with run repetitions (the page's hint and docs/view.md say it): a case
passes when every repetition with a final score reached the threshold; a repetition whose run failed has no score and
is not counted against it. The stand-in on 127.0.0.1; the build and what reads it run in the test's own process
(tests/support/prepared.py: the counting is the point, not a process)."""

from __future__ import annotations

import json

from clawstore.testing.standin import StandIn, error, text
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


def test_a_repetition_whose_run_failed_does_not_fail_its_case(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    ws.suite("main", ["m1"])
    ws.run_profile(repetitions=2, concurrency=1, defaults={"retries": 0})
    eval_profile(ws, repetitions=1)
    standin.script("vendor/m1", error(400, "bad request"), text("4"), text("4"), text("4"))  # one run of 4 fails
    standin.script(JUDGE, judge_reply(9))
    built = run_here(ws.root, "build", *CAMPAIGN)
    assert built.code == 1 and "Traceback" not in built.stderr, built
    done = run_here(ws.root, "query", "select case_id, count(*) as n from results group by 1 order by 1",
                    "--format", "json")
    assert sorted(r["n"] for r in json.loads(done.stdout)) == [1, 2], done.stdout  # one case judged once
    board = run_here(ws.root, "query", "leaderboard", "--format", "json")
    report = run_here(ws.root, "report", *CAMPAIGN, "--no-chart", "--output", "json")
    assert board.code == report.code == 0, (board, report)
    assert [r["pass_rate"] for r in json.loads(board.stdout)] == [1.0], board.stdout
    model = json.loads(report.stdout)["models"][0]
    assert (model["passed"], model["judged"]) == (2, 2), model
