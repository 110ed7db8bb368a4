"""Run independent tasks on a bounded pool of daemon threads, stoppable at any moment.

Daemon threads (not ThreadPoolExecutor) so that an interrupted build can exit at once: every finished
node is already durable in the store, and an unfinished one leaves nothing visible behind.
A task whose work returns `Later` (its node is being executed by another build) is set aside and
tried again once the given delay passed; tasks that can start now always go first.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_NO_MORE = object()  # tells a worker thread to end


@dataclass(frozen=True)
class Later:
    """What `work` returns for a task that cannot proceed yet: try it again after `delay_s`."""

    delay_s: float


@dataclass
class Outcome(Generic[T]):
    task: T
    value: Any = None
    error: BaseException | None = None


def run_tasks(tasks: Iterable[T], work: Callable[[T], Any], concurrency: int,
              on_done: Callable[[Outcome[T]], bool],
              on_interrupt: Callable[[int], None] | None = None) -> list[T]:
    """Run `work(task)` for every task with at most `concurrency` at once.

    `on_done` is called in the calling thread for each outcome; returning False stops scheduling new
    tasks (running ones finish). Returns the tasks that were never started (or were set aside and not
    finished when scheduling stopped).

    KeyboardInterrupt in the calling thread: without `on_interrupt` it propagates at once. With it, a
    first interrupt stops scheduling, calls `on_interrupt(running)` and waits for the running tasks
    (their outcomes still reach `on_done`), then re-raises; a second interrupt propagates at once and
    abandons the running threads (daemons; an unfinished node leaves nothing visible behind).
    """
    pending = list(tasks)
    pending.reverse()
    waiting: list[tuple[float, int, T]] = []  # (when to try again, tie-break, task)
    order = itertools.count()
    results: queue.Queue[Outcome[T]] = queue.Queue()
    running = 0
    stop = False
    interrupted = False

    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    workers = 0

    def worker() -> None:
        # Long-lived: starting a thread per task cost the calling thread more than some tasks do.
        while (task := inbox.get()) is not _NO_MORE:
            try:
                results.put(Outcome(task, value=work(task)))
            except BaseException as exc:  # noqa: BLE001 - reported to the caller, never swallowed
                results.put(Outcome(task, error=exc))

    try:
        while pending or running or (waiting and not stop):
            now = time.monotonic()
            while not stop and running < max(1, concurrency):
                if pending:
                    task = pending.pop()
                elif waiting and waiting[0][0] <= now:
                    task = heapq.heappop(waiting)[2]
                else:
                    break
                inbox.put(task)
                running += 1
                if running > workers:  # every worker is busy: one more, up to `concurrency`
                    threading.Thread(target=worker, daemon=True, name="claw-task").start()
                    workers += 1
            # A timeout keeps the main thread responsive to signals and wakes it for set-aside tasks.
            timeout = 0.2
            if waiting and not stop and running < max(1, concurrency):
                timeout = max(0.001, min(0.2, waiting[0][0] - time.monotonic()))
            try:
                if running == 0:
                    if stop or not waiting:
                        break
                    time.sleep(timeout)
                    continue
                outcome = results.get(timeout=timeout)
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                if on_interrupt is None or interrupted:
                    raise
                interrupted = stop = True
                on_interrupt(running)
                continue
            running -= 1
            if isinstance(outcome.value, Later):
                heapq.heappush(waiting, (time.monotonic() + outcome.value.delay_s, next(order), outcome.task))
                continue
            if not on_done(outcome):
                stop = True
    finally:
        for _ in range(workers):
            inbox.put(_NO_MORE)  # each worker ends after its current task
    if interrupted:
        raise KeyboardInterrupt
    pending.reverse()
    return pending + [task for _, _, task in sorted(waiting)]
