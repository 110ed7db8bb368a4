"""A build SIGKILLed after its first write made its journal (`builds/<id>.jsonl`) and before that write made its log
(`builds/<id>.json`) has sent nothing (the first write comes before its first request): its journal, a log's half
that nothing reads (`spend/killed.py` names a killed build by its log), was left forever before session 74, nobody
naming or removing it. The next `claw build` and `claw fsck --repair` remove it, as the other leftovers of killed
writers (store/core/leftovers.py); never a live build's, whose log is about to follow (real `claw` processes killed
by a real SIGKILL at that instant, the stand-in server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from clawstore.testing.standin import StandIn, text
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, many_cases

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
# `claw build` that stops at its log's first write, its journal made: killed there (`die`) or held there (`hold`).
STOPPED = """
import os, signal, sys, time
from clawstore.builder import buildlog
from clawstore.cli import main

def stop(*args, **kwargs):
    if sys.argv[1] == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)

buildlog.write_build_log = stop
main(["build", "--suite", "main", "--run-profile", "rp"])
"""


def _journals(store: Path) -> list[Path]:
    return sorted((store / "builds").glob("*.jsonl"))


def _stopped(ws: Workspace, how: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A build stopped between its journal and its log (`how`: die or hold); the journal it made."""
    build = subprocess.Popen([sys.executable, "-c", STOPPED, how], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    store = Path(os.environ["CLAW_STORE"])
    before = set(_journals(store)) if store.is_dir() else set()
    deadline = time.monotonic() + 60
    while not set(_journals(store)) - before and build.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    [journal] = set(_journals(store)) - before
    return build, journal


def _killed_before_its_log(tmp_path: Path, standin: StandIn) -> tuple[Workspace, Path]:
    ws: Workspace = many_cases(tmp_path / "ws", 3, concurrency=2)
    standin.set_default(text("four"))
    build, journal = _stopped(ws, "die")
    assert build.wait(timeout=60) == -signal.SIGKILL
    assert not journal.with_suffix(".json").exists() and not standin.requests  # nothing was paid
    return ws, journal


def test_the_next_build_removes_a_journal_its_killed_build_left_without_a_log(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    ws, journal = _killed_before_its_log(tmp_path, standin)
    status = run_here(ws.root, "status", *CAMPAIGN)
    assert status.code == 0 and "killed" not in status.stderr, status  # (nothing paid: nothing to name)
    built = run_here(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "killed" not in built.stderr, built
    assert not journal.exists(), "the killed build's journal is left"
    assert _journals(journal.parent) == []  # (the build's own journal sealed with its log)
    assert len(standin.requests) == 6


def test_fsck_repair_removes_a_dead_builds_journal_without_a_log_and_keeps_a_live_ones(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    ws, dead = _killed_before_its_log(tmp_path, standin)
    removed = "removed 1 journal(s) of builds killed before their first log (nothing was paid)"
    repaired = run_here(ws.root, "fsck", "--repair")
    assert repaired.code == 0 and removed in repaired.stdout, repaired
    assert not dead.exists()
    live, held = _stopped(ws, "hold")  # (a build alive between its journal and its log: its log is to follow)
    try:
        assert live.poll() is None, live.stderr
        repaired = run_here(ws.root, "fsck", "--repair")
        assert repaired.code == 0 and "journal" not in repaired.stdout, repaired
        assert held.exists()
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait()
    repaired = run_here(ws.root, "fsck", "--repair")
    assert repaired.code == 0 and removed in repaired.stdout, repaired
    assert not held.exists()


def test_a_journal_without_its_log_that_names_a_node_executed_is_kept(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    """Only a journal of which nothing was paid is removed: one naming a node executed (its log quarantined by fsck,
    say) is not a killed first write's, and stays."""
    ws, journal = _killed_before_its_log(tmp_path, standin)
    journal.write_bytes(b'{"action":"reuse","kind":"run"}\n{"action":"exec","kind":"run"}\n')
    repaired = run_here(ws.root, "fsck", "--repair")
    assert repaired.code == 0 and "journal" not in repaired.stdout, repaired
    assert journal.exists()
