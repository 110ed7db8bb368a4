"""A process forked beside a command and joined to it by two pipes (the chart's drawer, the view's shard maker):
the fork, and its end."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import BinaryIO


class Beside:
    """`child(requests_fd, answers_fd)` run in a forked process (it never returns into the command: it ends with
    os._exit); this side writes to `_send` and reads `_answers`. None forked (`_pid` None) where not `fork`, off
    Linux, or where a pipe or the fork cannot be made: the caller then does the work itself."""

    def __init__(self, child: Callable[[int, int], None], fork: bool = True) -> None:
        self._pid: int | None = None
        self._send: BinaryIO | None = None
        self._answers: BinaryIO | None = None
        if not fork or sys.platform != "linux":
            return
        try:
            to_child, from_parent = os.pipe()
            to_parent, from_child = os.pipe()
        except OSError:
            return
        # Ctrl-C held off over the fork: a KeyboardInterrupt in the child before `child` runs would unwind into the
        # command's own cleanup there (its locks, temp files, open pack); in the parent, before `_pid` is set, it
        # would leave the child unkilled.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for fd in (to_child, from_parent, to_parent, from_child):
                os.close(fd)
            return
        if pid == 0:  # (the child: never returns into the command, however `child` ends)
            try:
                os.close(from_parent)
                os.close(to_parent)
                _end_with(parent)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                child(to_child, from_child)
            finally:
                os._exit(1)
        os.close(to_child)
        os.close(from_child)
        self._pid = pid
        self._send = os.fdopen(from_parent, "wb")
        self._answers = os.fdopen(to_parent, "rb")
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def close(self) -> None:
        """End the child (killed if it is still at work) and reap it."""
        for stream in (self._send, self._answers):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self._send = self._answers = None
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = None


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _end_with(parent: int) -> None:
    """In the child: be killed when the parent dies (a SIGKILLed fsck's helper would otherwise go on with its pack or
    group for seconds, holding what it inherited: the index lock's descriptor under `--repair`). The signal follows
    the forking thread, and every Beside is made by a command's main thread. A parent already gone: end now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # (no prctl: the child still ends at its pipe's end, after its current item)
    if os.getppid() != parent:
        os._exit(1)
