"""`Beside.close` ends its forked process whatever it is doing: one still at work (deaf to its pipes closing and to
SIGTERM) is killed and reaped, so a command never waits on its helper nor leaves it running or a zombie."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from clawstore.host.beside import Beside

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Beside forks on Linux only")


def _deaf(requests_fd: int, answers_fd: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.write(answers_fd, b"up\n")
    while True:  # (never reads its orders: sees no EOF)
        time.sleep(1)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_close_kills_and_reaps_a_helper_still_at_work() -> None:
    beside = Beside(_deaf)
    pid = beside._pid
    assert pid is not None and beside._answers is not None
    assert beside._answers.readline() == b"up\n"
    closing = threading.Thread(target=beside.close, daemon=True)
    closing.start()
    closing.join(10)
    if closing.is_alive():  # (close waits on a helper it did not end: end it here, so the test fails, not hangs)
        os.kill(pid, signal.SIGKILL)
        closing.join(10)
        pytest.fail("close() waited on a helper still at work")
    assert _gone(pid), "killed and reaped: not even a zombie left"
    beside.close()  # (a second close is nothing)


def test_close_reaps_a_helper_that_already_ended() -> None:
    beside = Beside(lambda requests_fd, answers_fd: os._exit(0))
    pid = beside._pid
    assert pid is not None
    time.sleep(0.2)
    beside.close()
    assert _gone(pid)
