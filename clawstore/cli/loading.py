"""Ctrl-C while `claw` is still loading its modules or reading its arguments: one line and exit 130, not a traceback.

Loading takes 0.2-0.3 s, over a second on a loaded machine; an interrupt then printed a KeyboardInterrupt traceback
from deep in an import (click, typing) and ended the process by the signal; one while click read the arguments was
its "Aborted!", exit 1. Nothing is written before the command runs, so the process may end at once. Once the command is
over (`ClawGroup.invoke`) the same guard holds until the process ends: what the command printed is flushed first."""

from __future__ import annotations

import _signal as signal  # (the C module: `signal` converts its enums first, 0.5 ms more before the guard is up)
import os
import sys
import threading
from collections.abc import Callable
from types import FrameType

INTERRUPTED_EXIT = 130


def _end_quietly(signum: int, frame: FrameType | None) -> None:
    try:  # (after a command: what it printed is not lost with the process; a write it cut may not flush)
        sys.stdout.flush()
    except (OSError, RuntimeError, ValueError):
        pass
    sys.stderr.write("claw: interrupted\n")
    sys.stderr.flush()
    os._exit(INTERRUPTED_EXIT)


def quiet_interrupts(early: Callable[[int, FrameType | None], None] | None = None) -> Callable[[], None]:
    """Make Ctrl-C end the process quietly until the returned function is called (it puts Python's handler back).
    A no-op where claw does not own SIGINT: off the main thread, or where it was ignored or set by the caller.
    `early`: the handler cli/__init__.py set before this module loaded (claw's own, taken over here)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) not in (signal.default_int_handler, early):
        return lambda: None
    signal.signal(signal.SIGINT, _end_quietly)

    def restore() -> None:
        if signal.getsignal(signal.SIGINT) is _end_quietly:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return restore


def end_quiet_interrupts() -> None:
    """Put Python's handler back where quiet_interrupts set claw's (a command is starting: it turns
    KeyboardInterrupt into its own line, a build saying what it committed)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is _end_quietly:
        signal.signal(signal.SIGINT, signal.default_int_handler)
