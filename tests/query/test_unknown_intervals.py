"""An interval nothing was scored for is unknown, not [0, 10]: the saved queries' intervals are NULL with fewer than
two scored cases and the Wilson bounds NULL with no verdict (docs/query.md, Intervals in SQL), as `claw report`
says n/a. DuckDB's greatest() and least() pass over a NULL, so `greatest(0, NULL)` read as a low bound of 0 and
`least(10, NULL)` as a high one of 10 (real builds against the stand-in, the real DuckDB of `claw query`)."""

from __future__ import annotations

import json

from clawstore.testing.standin import StandIn
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.judging import eval_profile, judge_reply
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
BOUNDS = ("score_low", "score_high", "pass_low", "pass_high")


def _leaderboard(workspace: Workspace) -> dict[str, dict[str, object]]:
    done = run_here(workspace.root, "query", "leaderboard", "--format", "json")
    assert done.code == 0, done
    return {f"{r['campaign_id']}/{r['model_id']}": r for r in json.loads(done.stdout)}


def test_a_campaign_nothing_was_scored_in_has_no_interval(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0  # (no evaluation profile: no score, no verdict)
    rows = _leaderboard(ws)
    assert len(rows) == 2 and all(r["scored"] == 0 for r in rows.values()), rows
    assert all(r[name] is None for r in rows.values() for name in BOUNDS), rows  # (was 0, 10, 0, 0)
    done = run_here(ws.root, "query", "select wilson_low(NULL, NULL) as low, wilson_high(NULL, NULL) as high",
                    "--format", "json")
    assert json.loads(done.stdout) == [{"low": None, "high": None}], done


def test_one_scored_case_has_no_score_interval(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    ws.edit("suites/main.yaml", lambda d: d.update(models=d["models"][:1]))
    eval_profile(ws, repetitions=1)
    standin.script("judge/j1", judge_reply(7.0))
    assert run_here(ws.root, "build", *CAMPAIGN, "--evaluation-profile", "ev", "--case", "alpha").code == 0
    [row] = [r for key, r in _leaderboard(ws).items() if key.endswith("__ev/m1")]
    assert row["scored"] == 1 and row["mean_score"] == 7.0, row
    assert row["score_low"] is None and row["score_high"] is None, row  # (was 0 and 10)
    assert row["pass_low"] is not None, row  # (one verdict: its Wilson interval is known)
    done = run_here(ws.root, "query", "dimension_scores", "--format", "json")
    dims = json.loads(done.stdout)
    assert dims and all(r["low"] is None and r["high"] is None for r in dims), dims
