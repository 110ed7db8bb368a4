"""The scheduler's first Ctrl-C (or SIGTERM) stops launching and waits for the running tasks wherever the main thread
is when it arrives — in an outcome's bookkeeping as much as in its wait — and a second one cancels them."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from clawstore.builder.scheduler import Later, Outcome, run_tasks
from clawstore.host.process_end import sigterm_interrupts


def _held_tasks() -> tuple[threading.Event, object]:
    release = threading.Event()

    def work(task: int) -> int:
        if task == 1:  # the slow one: still running when task 0's outcome arrives
            assert release.wait(10)
        return task

    return release, work


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_first_interrupt_during_an_outcome_lets_the_running_task_finish(signum: int) -> None:
    # CI once saw a single Ctrl-C end a build at once: it arrived while the main thread recorded an outcome,
    # outside the wait that caught it, and the running nodes were abandoned.
    release, work = _held_tasks()
    done: list[int] = []
    told: list[int] = []

    def on_done(outcome: Outcome[int, int]) -> bool:
        done.append(outcome.task)
        if outcome.task == 0:
            os.kill(os.getpid(), signum)  # delivered here, in the bookkeeping
            time.sleep(0.05)
            threading.Timer(0.2, release.set).start()
        return True

    restore = sigterm_interrupts()  # (as a build does: SIGTERM ends it as Ctrl-C does)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_tasks([0, 1, 2, 3], work, 2, on_done, on_interrupt=told.append)
    finally:
        restore()
    assert told == [1]  # one task was running when the interrupt was taken up
    assert done == [0, 1]  # it finished and was recorded; none started after
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_an_interrupt_while_only_set_aside_tasks_wait_stops_the_build() -> None:
    told: list[int] = []
    tries: list[int] = []

    def work(task: int) -> int | Later:
        tries.append(task)
        if len(tries) == 1:
            threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
        return Later(1.0)  # set aside: the loop sleeps with nothing running

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_tasks([0], work, 1, lambda outcome: True, on_interrupt=told.append)
    assert time.monotonic() - started < 0.9 and told == [0] and tries == [0]


def test_a_second_interrupt_cancels_the_running_tasks_at_once() -> None:
    release, work = _held_tasks()
    told: list[int] = []

    def on_done(outcome: Outcome[int, int]) -> bool:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        return True

    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_tasks([0, 1], work, 2, on_done, on_interrupt=told.append)
    finally:
        release.set()
    assert time.monotonic() - started < 5  # task 1 was not waited for


def test_without_on_interrupt_a_first_interrupt_propagates_at_once() -> None:
    release, work = _held_tasks()
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_tasks([1], work, 1, lambda outcome: True)
    finally:
        release.set()
    assert time.monotonic() - started < 5
