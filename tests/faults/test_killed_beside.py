"""A build SIGKILLed while another build of the same campaign runs beside it: the other takes over its nodes, pays for
none twice but the killed one's requests in flight, and leaves none of the killed writer's leftovers (its claims' temp
files, its leases) behind it (real `claw` processes, the stand-in server, a real SIGKILL)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from clawstore.testing.standin import StandIn, held
from tests.hostile.attack import CLAW, run_claw
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.workspace import standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def _sent(standin: StandIn, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(standin.requests) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(standin.requests) >= count, standin.requests


def test_a_build_killed_beside_another_leaves_nothing_once_the_other_ends(tmp_path: Path, standin: StandIn,
                                                                         env: dict[str, str]) -> None:  # noqa: F811
    """Session 72's kill fuzzer: two builds at once, one killed. The survivor ran to the end (and the next build, a
    no-op its stamp answers, removes nothing); `claw fsck` counted the killed one's claim files and leases, stale:
    a build removed a dead writer's leftovers at its start only, when the killed one was still alive."""
    ws = standard(tmp_path / "ws")  # 2 cases x 2 models, 2 at once
    standin.set_default(held("answers"))
    first = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _sent(standin, 2)  # the first build holds two nodes' claims, its requests held
        second = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _sent(standin, 4)  # the second took the two others
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    standin.release("answers")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, out + err
    asked = Counter((r["model"], r["messages"][-1]["content"]) for r in standin.requests)
    assert len(asked) == 4 and sum(asked.values()) == 6, asked  # the killed one's two in flight, asked again

    fsck = run_claw(ws.root, "fsck")
    assert fsck.code == 0, fsck
    assert re.search(r"temp files: \d+ \(0 stale\); stale leases: 0;", fsck.stdout + fsck.stderr), fsck
