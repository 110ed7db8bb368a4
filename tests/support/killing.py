"""A real `claw build` SIGKILLed once what its log's summary counts says so (spend/killed.py as_logged: what
`killed_builds` would say of it then), never after a fixed time (a fixed 2.5 s found nothing counted at load 11-14)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from clawstore.spend.killed import KilledBuild, as_logged
from tests.hostile.attack import CLAW


def build_killed_when(cwd: Path, args: list[str], ready: Callable[[KilledBuild | None], bool],
                      seen: Callable[[], object] = lambda: "") -> Path:
    """Run `claw build *args` in `cwd`, SIGKILL it once `ready(the running build's summary, None before its log)`
    holds; the killed build's journal. AssertionError (with `seen()`) when it ends or 120 s pass first. The journals of
    builds killed before it are left aside."""
    builds = Path(os.environ["CLAW_STORE"]) / "builds"
    before = set(builds.glob("*.jsonl"))
    build = subprocess.Popen([CLAW, "build", *args], cwd=cwd, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while build.poll() is None and time.monotonic() < deadline:
            journals = list(set(builds.glob("*.jsonl")) - before)  # (the running build's: a finished one sealed it)
            if ready(as_logged(journals[0]) if journals else None):
                break
            time.sleep(0.02)
        else:
            raise AssertionError(f"never ready to be killed (exit {build.poll()}): {seen()}")
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    [journal] = list(set(builds.glob("*.jsonl")) - before)
    return journal
