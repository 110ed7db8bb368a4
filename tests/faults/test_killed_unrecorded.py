"""A paid answer whose record is refused (its metrics past a record's bounds: tests/hostile/test_paid_unrecorded.py)
is known to no store: only its build's log counts it. Before session 76 the log counted it at its next periodic write
(a node's end, 2 s after the last write), so a build killed while its other requests were in flight left it counted
nowhere: `claw status` named the killed build with 0 nodes, nothing of that paid answer. Now the node's failure is
written at once (real `claw build` SIGKILLed, the stand-in server; docs/building.md "Durable before reported")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from clawstore.spend.killed import as_logged
from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import CLAW
from tests.hostile.test_paid_unrecorded import TOP_PRICE, huge_tool_loop
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def test_a_paid_answer_no_record_holds_is_in_the_killed_builds_log_before_its_other_requests_end(
        ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    # big/alpha loops on a tool for its 8 turns, past what a record holds; every other run waits 10 minutes
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(context={"llm_probe": {"tools": ["read_file"]}}))
    ws.suite("main", ["big", "m1"])
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing=TOP_PRICE))
    ws.run_profile(concurrency=4, defaults={"timeout_seconds": 900})
    standin.script("vendor/big", *huge_tool_loop(), match="2 + 2")
    standin.set_default(text("four", latency=600))
    builds = Path(os.environ["CLAW_STORE"]) / "builds"
    build = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Killed once its log counts the failed node, or 30 s after big's 8th answer: the others are still in flight.
        deadline = None
        while build.poll() is None:
            journals = list(builds.glob("*.jsonl"))
            logged = as_logged(journals[0]) if journals else None
            if logged is not None and logged.executed >= 1:
                break
            answered = [r for r in standin.requests if r["model"] == "vendor/big" and "answered_at" in r]
            if deadline is None and len(answered) >= 8:
                deadline = time.monotonic() + 30
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert build.poll() is None, "the build ended: its other requests were not in flight"
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    assert len([r for r in standin.requests if r["model"] == "vendor/big"]) >= 8  # alpha's 8 turns paid
    assert not any("answered_at" in r for r in standin.requests if r["model"] != "vendor/big")
    status = run_here(ws.root, "status", *CAMPAIGN, "--output", "json")
    assert status.code == 0 and "Traceback" not in status.stderr, status
    [killed] = json.loads(status.stdout)["killed_builds"]
    # The paid answer, of a cost it did not report, counted: one node, its cost unknown (never 0, never nothing).
    assert killed["nodes"] == 1 and killed["cost_sources"] == {"unknown": 1}, killed
    assert killed["known_cost_usd"] is None and killed["cost_usd"] is None, killed
    assert "had executed 1 node(s) and spent an unknown amount (1 of 1 unknown)" in status.stderr, status.stderr
