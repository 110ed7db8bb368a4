"""A head written by a build `--max-cost` or an endpoint out of credit (a final HTTP 402) stopped says so, as one its
run profile's execution_policy stopped does (tests/builder/test_stopped_head.py): `claw report` (text and JSON),
`claw view`'s page, `claw status` and the `builds` query table name what stopped it and how many nodes it never
started. Before session 78 those heads said `complete` beside the rows of the runs it did not start (the build's
summary alone said why). The builds stopped (and the one after) are real `claw` processes against the stand-in server
on 127.0.0.1; what reads their heads back runs in this process (tests/support/prepared.py `run_here`)."""

from __future__ import annotations

import json
from pathlib import Path

from clawstore.testing.standin import StandIn, text
from tests.builder.test_out_of_credit import OUT_OF_CREDIT
from tests.hostile.attack import run_claw
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.prepared import run_here
from tests.support.workspace import many_cases
from tests.view.test_view_page import summary_of

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def _stopped_build(root: Path, *flags: str) -> int:
    """`claw build` stopped (exit 1): the nodes it did not start (its rows' `skip`)."""
    built = run_claw(root, "build", *CAMPAIGN, *flags, "--output", "json")
    assert built.code == 1 and "Traceback" not in built.stderr, built
    skipped = sum(row["run"] == "skip" for row in json.loads(built.stdout)["rows"])
    assert skipped >= 1, built.stdout
    return skipped


def _says_stopped(root: Path, tmp_path: Path, by: str, words: str, skipped: int) -> None:
    """The report's `Head:` line, its JSON, the view's header and the builds table say the stop, not `complete`."""
    report = run_here(root, "report", *CAMPAIGN, "--no-chart")
    assert report.code == 0 and "Traceback" not in report.stderr, report
    head = next(line for line in report.stdout.splitlines() if line.startswith("Head: "))
    assert "complete" not in head and f"stopped by {words}: {skipped} node(s) not started" in head, head
    data = run_here(root, "report", *CAMPAIGN, "--output", "json")
    stopped = {"by": by, "nodes_not_started": skipped}
    head_json = json.loads(data.stdout)["head"]
    assert head_json["state"] == "stopped" and head_json["stopped"] == stopped, head_json
    page = tmp_path / "view.html"
    viewed = run_here(root, "view", *CAMPAIGN, "--out", str(page))
    assert viewed.code == 0, viewed
    [campaign] = summary_of(page.read_text(encoding="utf-8"))["campaigns"]
    assert campaign["stopped"] == stopped and f"{skipped} node(s) not started" in campaign["state_text"], campaign
    builds = run_here(root, "query", "select state from builds order by started_at", "--format", "json")
    assert json.loads(builds.stdout)[-1] == {"state": "stopped"}, builds
    status = run_here(root, "status", *CAMPAIGN)  # (its table counts them STALE or NEVER_BUILT: it says why)
    assert status.code == 0, status
    assert f"build {head_json['build_id']} was stopped by {words}: {skipped} node(s) not started" in status.stderr, \
        status
    as_json = run_here(root, "status", *CAMPAIGN, "--output", "json")
    assert json.loads(as_json.stdout)["stopped"] == stopped, as_json


def test_a_head_max_cost_stopped_says_so(tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    # 8 runs, one at a time, priced (the server reports no cost): its history plans 0.1 USD a run, they cost 0.3
    ws = many_cases(tmp_path / "ws", 4, concurrency=1)
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 0.0, "output": 1000.0}) for m in d["models"]])
    standin.set_default(text("short", usage={"cost": None, "prompt_tokens": 10, "completion_tokens": 100}))
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0  # (its history, in this process: what it prepares)
    standin.set_default(text("long", usage={"cost": None, "prompt_tokens": 10, "completion_tokens": 300}))
    skipped = _stopped_build(ws.root, "--force", "--max-cost", "1.0")  # (the plan: 0.8 USD)
    assert skipped == 8 - 4, skipped  # (0.9 < 1.0 ≤ 1.2: the fifth never starts)
    _says_stopped(ws.root, tmp_path, "max_cost", "--max-cost", skipped)

    again = run_claw(ws.root, "build", *CAMPAIGN, "--force")  # no limit: all built, its head complete
    assert again.code == 0, again
    report = run_here(ws.root, "report", *CAMPAIGN, "--output", "json")
    assert json.loads(report.stdout)["head"]["state"] == "complete", report.stdout
    assert json.loads(report.stdout)["head"]["stopped"] is None, report.stdout


def test_a_head_an_endpoint_out_of_credit_stopped_says_so(tmp_path: Path, standin: StandIn,
                                                          env: dict[str, str]) -> None:  # noqa: F811
    ws = many_cases(tmp_path / "ws", 3, concurrency=1)  # 6 runs, one at a time
    standin.script("*", text("four"), OUT_OF_CREDIT)
    skipped = _stopped_build(ws.root)
    assert skipped == 6 - 2, skipped  # (one answered, one refused: nothing more sent there)
    _says_stopped(ws.root, tmp_path, "out_of_credit", "an endpoint out of credit (HTTP 402)", skipped)


def test_judgements_an_endpoint_out_of_credit_kept_from_starting_are_counted(tmp_path: Path, standin: StandIn,
                                                                              env: dict[str, str]) -> None:  # noqa: F811
    """The judge's endpoint refuses: every run is built, the judgements not started are the nodes counted (a policy
    stops runs only; these stops keep nodes of every kind from starting)."""
    ws = many_cases(tmp_path / "ws", 3, concurrency=1)  # 6 runs, a judgement each
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(8), OUT_OF_CREDIT)
    standin.script("*", text("4"))
    built = run_claw(ws.root, "build", *CAMPAIGN, "--evaluation-profile", "ev", "--output", "json")
    assert built.code == 1, built
    summary = json.loads(built.stdout)
    assert all(row["run"] != "skip" for row in summary["rows"]), summary["rows"]
    skipped = summary["counts"]["skipped"]
    assert skipped == 6 - 2, summary["counts"]  # (one judged, one refused: the other four not started)
    report = run_here(ws.root, "report", *CAMPAIGN, "--evaluation-profile", "ev", "--output", "json")
    assert json.loads(report.stdout)["head"]["stopped"] == {"by": "out_of_credit", "nodes_not_started": skipped}
