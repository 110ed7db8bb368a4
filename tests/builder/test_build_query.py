"""End to end: what `claw build` records is what `claw query` and `claw report` see."""

from __future__ import annotations

import json

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import eval_profile, judge_reply
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


def test_query_and_report_after_builds(ws: Workspace, claw: Claw, standin: StandIn, tmp_path) -> None:
    ws.run_profile(repetitions=2)
    eval_profile(ws, repetitions=2)
    standin.script("judge/j1", judge_reply(6))
    assert claw("build", *CAMPAIGN)[0] == 0
    code, out, err = claw("query", "select count(*) as n from runs", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == [{"n": 8}]
    code, out, _ = claw("query", "select model_id, count(*) as n, avg(final_score) as s from results "
                                 "group by 1 order by 1", "--format", "json")
    assert json.loads(out) == [{"model_id": "m1", "n": 4, "s": 6.0}, {"model_id": "m2", "n": 4, "s": 6.0}]
    code, out, _ = claw("query", "select count(*) as n from judgements", "--format", "json")
    assert json.loads(out) == [{"n": 16}]
    # A second (no-op) build is recorded too; the runs table still counts each run once.
    assert claw("build", *CAMPAIGN)[0] == 0
    code, out, _ = claw("query", "select count(*) as n from runs", "--format", "json")
    assert json.loads(out) == [{"n": 8}]
    code, out, _ = claw("query", "select count(*) as n from builds", "--format", "json")
    assert json.loads(out) == [{"n": 2}]
    code, out, _ = claw("query", "leaderboard")
    assert code == 0 and "m1" in out and "m2" in out
    chart = tmp_path / "chart.png"
    code, out, err = claw("report", *CAMPAIGN, "--chart", str(chart))
    assert code == 0, err
    assert "m1" in out and "alpha" in out
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # After a config change, report still shows the last build and sends nothing.
    sent = len(standin.requests)
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="changed"))
    code, out, _ = claw("report", *CAMPAIGN, "--output", "json", "--no-chart")
    assert code == 0
    report = json.loads(out)
    assert len(standin.requests) == sent
    assert report and "alpha" in json.dumps(report)
