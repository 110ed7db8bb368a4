"""The watchdog processes of OpenClaw builds (runners/openclaw/watchdog.py), found in /proc by what they sweep (a
build's store, a Ray attempt's container CLI): a `/bin/sh -c <script> claw-watchdog <python> -m … build <store> <build
id>` (or `label <cli> <label>`) until the process it watches dies, that Python after."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

NAME = "claw-watchdog"  # (its $0; spelled here, not imported: a test of it must fail where there is none)


def watchdogs(store: Path | str) -> dict[int, list[str]]:
    """pid → argv of every watchdog of builds of the store at `store` (a Path), or naming `store` (a str: a CLI)."""
    wanted = str(store.resolve()) if isinstance(store, Path) else store
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


def wait_for_watchdog(store: Path, build: int, within: float = 60.0) -> int:
    """The pid of the one watchdog of `store`'s builds, once it is there: not the shell the build process `build`
    started (the same command line), which starts it in its background and exits."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = [pid for pid in watchdogs(store) if _parent(pid) not in (build, None)]
        if found:
            [pid] = found
            return pid
        time.sleep(0.02)
    raise AssertionError(f"no watchdog of the builds of {store} in {within:.0f} s")


def _parent(pid: int) -> int | None:
    try:
        return int((Path("/proc") / str(pid) / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def kill_watchdogs(store: Path | str) -> list[int]:
    """SIGKILL the watchdogs of `store`'s builds (what a reboot or a kill of every process does): the next build or
    gc is then the one to stop a killed build's containers."""
    pids = list(watchdogs(store))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    return pids
