"""How a `claw` process ends: teardown that only the process's own end needs (Ray's disconnect, the interpreter's
teardown) may be left to it, once the work is committed. The figures: docs/distributed.md (Details by module)."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

_exit_work: list[Callable[[], None]] = []
_program = False  # this process is the `claw` program: it ends when its command ends
_left = False  # something left its teardown to the process's end


def sigterm_interrupts() -> Callable[[], None]:
    """Make SIGTERM (a scheduler's stop, `timeout`, `docker stop`) end the command as Ctrl-C does: a
    KeyboardInterrupt in the main thread, so what finished is kept and temporary files are removed; the
    default action would end the process on the spot. Returns what puts the previous handler back.
    Off the main thread (a test harness's) nothing changes."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, previous)


def at_exit(work: Callable[[], None]) -> Callable[[], None]:
    """Register claw's own work for the process's end (as atexit does); it also runs on a quick end."""
    _exit_work.append(work)
    atexit.register(work)
    return work


def claim_program() -> None:
    """Called by the `claw` program before its command runs."""
    global _program
    _program = True


def is_program() -> bool:
    """Is this the `claw` program (one command, then the process ends), not a caller running commands in its own
    process (tests' CliRunner, a library user)?"""
    return _program


def leave_to_exit() -> bool:
    """May the caller leave its teardown to the process's end? True only in the `claw` program, which
    then ends quickly (`finish`)."""
    global _left
    _left = _left or _program
    return _program


def finish(code: object) -> None:
    """End the process now if some teardown was left to its end (claw's exit work done, output
    flushed); otherwise return, and the caller exits as usual."""
    if _left:
        _end_now(code)


def _end_now(code: object) -> NoReturn:
    for work in _exit_work:
        work()
        atexit.unregister(work)
    if isinstance(code, str):  # sys.exit("message"): printed, status 1, as the interpreter does
        print(code, file=sys.stderr)
    import logging  # (here, not at the top: a no-op build's path never imports it)

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
