"""Run independent tasks on a bounded pool of daemon threads, stoppable at any moment.

Daemon threads (not ThreadPoolExecutor) so that an interrupted build can exit at once: every finished
node is already durable in the store, and an unfinished one leaves nothing visible behind.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


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
    tasks (running ones finish). Returns the tasks that were never started.

    KeyboardInterrupt in the calling thread: without `on_interrupt` it propagates at once. With it, a
    first interrupt stops scheduling, calls `on_interrupt(running)` and waits for the running tasks
    (their outcomes still reach `on_done`), then re-raises; a second interrupt propagates at once and
    abandons the running threads (daemons; an unfinished node leaves nothing visible behind).
    """
    pending = list(tasks)
    pending.reverse()
    results: queue.Queue[Outcome[T]] = queue.Queue()
    running = 0
    stop = False
    interrupted = False

    def worker(task: T) -> None:
        try:
            results.put(Outcome(task, value=work(task)))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller, never swallowed
            results.put(Outcome(task, error=exc))

    while pending or running:
        while not stop and pending and running < max(1, concurrency):
            task = pending.pop()
            threading.Thread(target=worker, args=(task,), daemon=True).start()
            running += 1
        if running == 0:
            break
        while True:
            try:  # a timeout keeps the main thread responsive to signals
                outcome = results.get(timeout=0.2)
                break
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                if on_interrupt is None or interrupted:
                    raise
                interrupted = stop = True
                on_interrupt(running)
        running -= 1
        if not on_done(outcome):
            stop = True
    if interrupted:
        raise KeyboardInterrupt
    pending.reverse()
    return pending
