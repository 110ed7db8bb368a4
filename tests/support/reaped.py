"""The processes a test starts, ended with the test whatever way it ends.

A test that starts a process and stops it at its end left it running when an assertion (or a timeout) failed in
between: a stand-in provider, a store writer or lease holder that sleeps for ten minutes, a gc waiting for a line on
stdin. In an xdist worker the failed test's frames are kept (`sys.last_traceback`), and with them its pipes: a child
waiting to read or to write one waits until the worker ends. Session 74 found a stand-in left after its run; session 75
proved the others (docs/testing.md, "Processes a test starts").

    proc = subprocess.Popen(...)
    with reaped(proc):
        ...  # the test's steps and assertions, unchanged

    with reaped() as started:
        procs = [started(subprocess.Popen(...)) for _ in range(4)]

    def test_x(reap):  # the fixture: ended at the test's teardown
        proc = reap(subprocess.Popen(...))

At the block's end, a process still running is SIGKILLed with the processes under it (its process group when it leads
one, `start_new_session=True`, and the descendants found in /proc before the kill), reaped, and its pipes closed. A
process that already ended is only reaped, so a test's own `communicate()` and exit-code assertions read what they
read before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

P = TypeVar("P", bound="subprocess.Popen[Any]")
Reap = Callable[["subprocess.Popen[Any]"], "subprocess.Popen[Any]"]  # the fixture's type, for a test's signature


def descendants(pid: int) -> list[int]:
    """Every live process under `pid` (children first found, then theirs), read from /proc."""
    found: list[int] = []
    queue = [pid]
    while queue:
        parent = queue.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError):
                for child in map(int, (task / "children").read_text().split()):
                    if child not in found:
                        found.append(child)
                        queue.append(child)
    return found


def end(proc: subprocess.Popen[Any]) -> None:
    """`proc` and what runs under it SIGKILLed if it still runs, reaped, and its pipes closed; nothing is done to a
    process that already ended (its pipes are the test's to read)."""
    if proc.poll() is not None:
        return
    under = descendants(proc.pid)
    with contextlib.suppress(OSError):
        if os.getpgid(proc.pid) == proc.pid:  # it leads its own group (start_new_session=True)
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    for pid in under:  # (one that left the group: a daemon in a session of its own)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


@contextlib.contextmanager
def reaped(*procs: subprocess.Popen[Any]) -> Iterator[Callable[[P], P]]:
    """Every process of `procs`, and each the block hands to the callable it yields, ended when the block ends."""
    kept = list(procs)

    def started(proc: P) -> P:
        kept.append(proc)
        return proc

    try:
        yield started
    finally:
        for proc in kept:
            end(proc)


@pytest.fixture
def reap() -> Iterator[Callable[[P], P]]:
    """`reaped` as a fixture (tests/conftest.py): `proc = reap(subprocess.Popen(...))` is ended at the test's teardown
    if it still runs then, with no block to indent."""
    with reaped() as started:
        yield started
