"""The watchdog processes of OpenClaw builds (runners/openclaw/watchdog.py), found in /proc by the store they sweep:
a `/bin/sh -c <script> claw-watchdog <python> -m … <store> <build id>` until the build dies, that Python after."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

NAME = "claw-watchdog"  # (its $0; spelled here, not imported: a test of it must fail where there is none)


def watchdogs(store: Path) -> dict[int, list[str]]:
    """pid → argv of every watchdog of builds of the store at `store`."""
    wanted = str(store.resolve())
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:  # (ended while we looked)
            continue
        text = [arg.decode(errors="replace") for arg in argv]
        if (NAME in text[:4] or "clawstore.runners.openclaw.watchdog" in text) and wanted in text:
            found[int(entry.name)] = text
    return found


def wait_for_watchdog(store: Path, within: float = 60.0) -> int:
    """The pid of the one watchdog of `store`'s builds, once it is there."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = watchdogs(store)
        if found:
            [pid] = found
            return pid
        time.sleep(0.02)
    raise AssertionError(f"no watchdog of the builds of {store} in {within:.0f} s")


def kill_watchdogs(store: Path) -> list[int]:
    """SIGKILL the watchdogs of `store`'s builds (what a reboot or a kill of every process does): the next build or
    gc is then the one to stop a killed build's containers."""
    pids = list(watchdogs(store))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    return pids
