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


def ignore_late_interrupts() -> None:
    """The `claw` program's last atexit callback (registered first): from here a Ctrl-C is ignored. After its
    callbacks the interpreter puts SIGINT's default action back as it tears itself down (a handler that ignores it
    it leaves), and a Ctrl-C then ended the process by the signal (status -2) after its output was written: 15 of 16
    sent as `claw --version`'s line arrived (tests/test_cli_interrupt_end.py). Nothing of the command is left to
    stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def end_interrupted() -> NoReturn:
    """The program's end once it said `claw: interrupted`: exit 130, always. Left to the interpreter it could end by
    SIGINT instead (status -2): CPython kills itself with SIGINT at its end when a KeyboardInterrupt escaped code a
    C extension ran through `PyRun_*` earlier in the process (a flag that stays set; the program run as `python -m
    clawstore.cli`), though claw caught the interrupt. What the interpreter's end does that matters is done first
    (its threads joined, every atexit callback run, claw's exit work among them, output flushed); its teardown is
    skipped."""
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # (what the interpreter's end does first)
    atexit._run_exitfuncs()
    for work in _exit_work:
        atexit.unregister(work)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(130)


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
