"""A SIGKILLed build's spending is shown before any rebuild: `claw status` and `claw report` say that a killed build
spent money (at least what its log counted by its last write), not nothing; once a build that found it killed at its
start has ended (and named it), the note is gone (a real `claw build` process, the stand-in server, a real SIGKILL;
a build that only moves the head, and the `status` and `report` read after the kill, in the test's own process, as
tests/faults/test_killed_json.py's: the same commands without a child's start each)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import CLAW
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, many_cases

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
KILLED = "was killed before it finished: by its log's last write it had executed"


def _killed_mid_build(tmp_path: Path, standin: StandIn, reply: dict[str, Any], cases: int = 30,
                      after_s: float = 3.0) -> Workspace:
    """A campaign's build, SIGKILLed `after_s` after its first request (by default 3 s: past its log's first write,
    every 2 s, far from the 30 cases' 60 requests' end)."""
    ws: Workspace = many_cases(tmp_path / "ws", cases, concurrency=2)
    standin.set_default(reply)
    build = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not standin.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(after_s)
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    return ws


def test_a_killed_build_that_spent_money_is_shown_before_any_rebuild(tmp_path: Path, standin: StandIn,
                                                                     env: dict[str, str]) -> None:  # noqa: F811
    ws = _killed_mid_build(tmp_path, standin, text("four", latency=0.3))
    answered = sum(1 for r in standin.requests if r.get("answered_at"))
    assert 4 <= answered < 60, answered

    status = run_here(ws.root, "status", *CAMPAIGN)
    assert status.code == 0 and "Traceback" not in status.stderr, status
    [line] = [line for line in status.stderr.splitlines() if KILLED in line]
    spent = re.search(r"spent ≥(\d+\.\d{6}) USD;", line)
    assert spent is not None and float(spent.group(1)) > 0 and "not counted" in line, line
    report = run_here(ws.root, "report", *CAMPAIGN, "--no-chart")
    assert report.code == 2 and "killed before it wrote its head" in report.stderr, report  # (its head never moved)
    assert KILLED in report.stderr, report

    standin.set_default(text("four"))
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0  # (moves the head: in this process)
    after = run_here(ws.root, "status", *CAMPAIGN)
    assert after.code == 0 and KILLED not in after.stderr, after
    assert KILLED not in run_here(ws.root, "report", *CAMPAIGN, "--no-chart").stderr


def test_a_build_killed_in_the_second_its_head_moved_is_still_shown(tmp_path: Path, standin: StandIn,
                                                                     env: dict[str, str]) -> None:  # noqa: F811
    """`claw build && claw build`, the second killed: it may start in the same second the first moved the head. Its
    id says its start to the second only; compared with the head's time, it was passed over as older than the head
    (as if the first had superseded it), and its spending was not shown."""
    ws: Workspace = many_cases(tmp_path / "ws", 30, concurrency=2)
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0  # (the first build: in this process)
    store = Path(env["CLAW_STORE"])
    [head] = [p for p in store.rglob("campaigns/*") if p.is_file()]
    standin.set_default(text("five", latency=0.3))
    build = subprocess.Popen([CLAW, "build", *CAMPAIGN, "--force"], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sent, deadline = len(standin.requests), time.monotonic() + 60
        while len(standin.requests) == sent and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(3.0)  # past the log's first write (every 2 s)
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    [journal] = [p for p in store.rglob("*.jsonl") if p.parent.name == "builds"]
    second = datetime.strptime(journal.stem[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC).timestamp()
    os.utime(head, (second, second))  # the head moved in that second (at its start: the build began after it)

    status = run_here(ws.root, "status", *CAMPAIGN)
    assert status.code == 0 and "Traceback" not in status.stderr, status
    assert KILLED in status.stderr and journal.stem in status.stderr, status


def test_a_killed_build_whose_costs_are_all_unknown_never_says_0(tmp_path: Path, standin: StandIn,
                                                                  env: dict[str, str]) -> None:  # noqa: F811
    """A server that reports no cost and models without pricing: the killed build's log counts its paid nodes'
    costs as unknown, and the note says an unknown amount, not '≥0.000000 USD' (as every cost cell says `?`)."""
    ws = _killed_mid_build(tmp_path, standin, text("four", latency=0.3, usage={"cost": None}))
    status = run_here(ws.root, "status", *CAMPAIGN)
    assert status.code == 0 and "Traceback" not in status.stderr, status
    [line] = [line for line in status.stderr.splitlines() if KILLED in line]
    assert re.search(r"spent an unknown amount \((\d+) of \1 unknown\);", line) and "0.000000" not in line, line


def test_a_build_killed_before_its_first_node_finished_is_named(tmp_path: Path, standin: StandIn,
                                                                env: dict[str, str]) -> None:  # noqa: F811
    """Killed in its first seconds, its requests in flight: its log was written (state running) before its first
    request, but its journal only with its first node, and a killed build was found by its journal: not named."""
    ws = _killed_mid_build(tmp_path, standin, text("four", latency=30), cases=4, after_s=0.3)
    assert standin.requests and not any(r.get("answered_at") for r in standin.requests)
    status = run_here(ws.root, "status", *CAMPAIGN)
    assert status.code == 0 and "Traceback" not in status.stderr, status
    [line] = [line for line in status.stderr.splitlines() if KILLED in line]
    assert "executed 0 node(s) and spent an unknown amount" in line and "requests in flight" in line, line
    report = run_here(ws.root, "report", *CAMPAIGN, "--no-chart")
    assert KILLED in report.stderr, report
