"""A `Beside` child ends with the process that forked it: a SIGKILLed fsck's helper must not go on verifying (and, under
`fsck --repair`, holding the index lock's descriptor it inherited) until its current pack or group is done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Beside forks on Linux only")

# The parent: forks a Beside whose child is at work (a sleep standing for a long pack) and never reads its pipe,
# prints the child's pid, then waits to be killed.
_PARENT = """
import os, sys, time
from clawstore.host.beside import Beside

def busy(requests_fd, answers_fd):
    time.sleep(60)

beside = Beside(busy)
print(beside._pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie has ended (its reaper is init)
    except FileNotFoundError:
        return False


def test_a_child_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child), "the helper outlived the process that forked it"
    finally:
        parent.kill()
        parent.wait(10)
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
