"""A head written by a build its run profile's `execution_policy` stopped says so: `claw report` (text and JSON) and
`claw view`'s page name the policy and how many runs it kept from starting. Before session 78 the report said
`Head: build … (complete …)` and `Rows: 1` beside two cases that never ran (the head holds only the nodes built; the
build log alone counted them skipped). Builds in this process, the stand-in server; report as a real `claw` process."""

from __future__ import annotations

import json
from pathlib import Path

from clawstore.testing.standin import StandIn, error
from tests.hostile.attack import run_claw
from tests.support.claw import Claw
from tests.support.workspace import Workspace
from tests.view.test_view_page import summary_of

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def _head_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Head: "))


def test_a_head_a_policy_stopped_says_the_runs_it_never_started(ws: Workspace, claw: Claw, standin: StandIn,
                                                                 monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.run_profile(concurrency=1, stop_on_runner_error=True, defaults={"retries": 0})
    standin.script("vendor/m1", error(500))
    code, out, _ = claw.build("--output", "json")
    skipped = sum(r["run"] == "skip" for r in json.loads(out)["rows"])
    assert code == 1 and skipped >= 1, out

    report = run_claw(ws.root, "report", *CAMPAIGN, "--no-chart")
    assert report.code == 0 and "Traceback" not in report.stderr, report
    head = _head_line(report.stdout)
    assert "complete" not in head, head
    assert (f"stopped by the run profile's execution_policy (stop_on_runner_error): {skipped} node(s) not started"
            in head), head
    data = run_claw(ws.root, "report", *CAMPAIGN, "--output", "json")
    assert data.code == 0, data
    stopped = {"by": "stop_on_runner_error", "nodes_not_started": skipped}
    head_json = json.loads(data.stdout)["head"]
    assert head_json["state"] == "stopped" and head_json["stopped"] == stopped, head_json
    page = tmp_path / "view.html"
    code, _, err = claw("view", *CAMPAIGN, "--out", str(page))
    assert code == 0, err
    [campaign] = summary_of(page.read_text(encoding="utf-8"))["campaigns"]
    assert campaign["state"] == "stopped" and campaign["stopped"] == stopped, campaign
    assert f"{skipped} node(s) not started" in campaign["state_text"], campaign  # (the header's words: view.js)

    code, out, err = claw("query", "select state from builds", "--format", "json")
    assert code == 0 and json.loads(out) == [{"state": "stopped"}], out + err
    status = run_claw(ws.root, "status", *CAMPAIGN)  # (why its table counts those runs NEVER_BUILT)
    assert (f"build {head_json['build_id']} was stopped by the run profile's execution_policy (stop_on_runner_error): "
            f"{skipped} node(s) not started" in status.stderr), status

    standin.reset()  # the next build runs them: its head is complete, nothing stopped
    code, out, _ = claw.build()
    assert code == 0, out
    again = run_claw(ws.root, "report", *CAMPAIGN, "--output", "json")
    assert json.loads(again.stdout)["head"]["state"] == "complete", again.stdout
    assert json.loads(again.stdout)["head"]["stopped"] is None, again.stdout
    assert "(complete;" in _head_line(run_claw(ws.root, "report", *CAMPAIGN, "--no-chart").stdout)
