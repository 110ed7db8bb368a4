"""A build's threads on one CPU (`CLAW_BUILD_ONE_CPU=1`, Linux; off by default).

A build runs Python in one thread at a time (the interpreter lock): spread over several CPUs, its 17+ threads hand the
lock to one another across CPUs (a wake-up on another CPU, caches filled again there) at every request and system
call. Kept on one CPU, the same hand-offs cost less: docs/building.md (Session 50) measured ~13 % less CPU a request.
The processes a build starts (hooks, sandboxed commands) get the CPUs back (`spawning`): only the build's threads share
one. Details: docs/building.md (Settings of the machine; Session 50)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_held = 0  # calling threads inside `threads_on_one_cpu`
_wide: set[int] | None = None  # the CPUs the build was given (None: nothing is pinned)


def _current_cpu(allowed: set[int]) -> int:
    """The CPU this thread last ran on (field 39 of its stat: where the scheduler put it), else the first allowed."""
    try:
        with open("/proc/thread-self/stat", "rb") as handle:
            cpu = int(handle.read().rsplit(b")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        cpu = -1
    return cpu if cpu in allowed else min(allowed)


@contextlib.contextmanager
def threads_on_one_cpu(enabled: bool) -> Iterator[None]:
    """While open, the calling thread, and the threads it starts, run on one CPU of those it was given; restored
    after. Nothing where the system cannot pin a thread, or with one CPU given."""
    global _held, _wide
    if not enabled or not hasattr(os, "sched_setaffinity"):
        yield
        return
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        yield
        return
    os.sched_setaffinity(0, {_current_cpu(allowed)})  # (0: the calling thread alone, on Linux)
    with _lock:
        _held += 1
        _wide = _wide or allowed
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)
        with _lock:
            _held -= 1
            if not _held:
                _wide = None


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around starting a process (a hook, a sandboxed command): it is not the build's to share, so the calling thread
    is given the build's CPUs back while it starts one (a process inherits the mask of the thread that forks it, and
    a mask set on it afterwards would miss what it forked already: bubblewrap forks at once)."""
    wide = _wide
    if wide is None:
        yield
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, wide)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)
