"""Run independent tasks on a bounded pool of daemon threads, stoppable at any moment: every finished node is already
durable, an unfinished one leaves nothing visible. Details: docs/building.md (Details by module)."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from clawstore.builder.lanes import Lane, Lanes

T = TypeVar("T")
R = TypeVar("R")
_NO_MORE = object()  # tells a worker thread to end
_WAKE = object()  # a paused task gave its slot back: another may start


@dataclass(frozen=True)
class Later:
    """What `work` returns for a task that cannot proceed yet: try it again after `delay_s`."""

    delay_s: float


@dataclass
class Outcome(Generic[T, R]):
    task: T
    value: R | None = None
    error: BaseException | None = None


def run_here(tasks: Iterable[T], work: Callable[[T], R | Later], on_done: Callable[[Outcome[T, R]], bool],
             then: Callable[[list[T]], list[T]], on_interrupt: Callable[[int], None] | None = None,
             on_idle: Callable[[], None] | None = None) -> list[T]:
    """Run `work(task)` for each task in the calling thread, one after another: for cheap local work, whose hand-off
    to a worker thread and back cost more than the work. `on_done` as in `run_tasks`; tasks set aside (`Later`) go
    to `then` (run_tasks) at the end. Returns the tasks never started. Interrupts as in `run_tasks`: a first Ctrl-C
    (or SIGTERM) lets the running task finish and reach `on_done`, calls `on_interrupt(0)` and raises; a second one
    raises at once. `on_idle` is called once the tasks are done (as `run_tasks` calls it before each wait)."""
    tasks = list(tasks)
    aside: list[T] = []
    rest: list[T] | None = None  # what on_done's stop left
    with deferred_interrupts() as interrupted:
        for index, task in enumerate(tasks):
            if interrupted:  # (noted before this call too: between two windows)
                break
            try:
                value = work(task)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - reported to the caller, never swallowed
                outcome: Outcome[T, R] = Outcome(task, error=exc)
            else:
                if isinstance(value, Later):
                    aside.append(task)
                    continue
                outcome = Outcome(task, value=value)
            if not on_done(outcome):
                rest = tasks[index + 1:]
                break
    if on_idle is not None:
        on_idle()
    if interrupted:  # (noted up to the handlers' restoring)
        if on_interrupt is not None:
            on_interrupt(0)
        raise KeyboardInterrupt
    if rest is not None:
        return aside + rest
    return then(aside) if aside else []


class _Deferral:
    """The open deferral of the main thread: what was noted, and the wake of each nested user, innermost last."""

    def __init__(self) -> None:
        self.noted: list[int] = []
        self.wakes: list[Callable[[], None] | None] = []
        self.at_once = 0  # open `interrupts_at_once` stretches

    def note(self, signum: int, frame: object) -> None:
        if self.noted or self.at_once:
            raise KeyboardInterrupt
        self.noted.append(signum)
        if (wake := self.wakes[-1]) is not None:
            wake()


_open: _Deferral | None = None  # (main thread only: signal handlers run there)


@contextlib.contextmanager
def deferred_interrupts(wake: Callable[[], None] | None = None) -> Iterator[list[int]]:
    """While open, a first SIGINT or SIGTERM is noted in the list it yields (and `wake` called: it must be safe in a
    signal handler) instead of raising wherever the main thread is (inside a task's store writes, or an outcome's
    bookkeeping); a second raises KeyboardInterrupt at once. Nested (a build's windows inside the build's own), the
    inner one shares the outer's list: an interrupt noted between two windows is seen by the next one at its start.
    Off the main thread, nothing changes."""
    global _open
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    if _open is not None:
        _open.wakes.append(wake)
        try:
            yield _open.noted
        finally:
            _open.wakes.pop()
        return
    deferral = _Deferral()
    deferral.wakes.append(wake)
    previous: dict[int, Any] = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, deferral.note)
        _open = deferral
        yield deferral.noted
    finally:
        _open = None
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def interrupts_at_once() -> Iterator[None]:
    """Inside a deferral, a stretch where an interrupt raises where it lands, as outside one: the build's own thread
    waiting (between a provider batch's polls), where there is nothing to finish first. One noted before it raises at
    its start."""
    deferral = _open if threading.current_thread() is threading.main_thread() else None
    if deferral is None:
        yield
        return
    if deferral.noted:
        raise KeyboardInterrupt
    deferral.at_once += 1
    try:
        yield
    finally:
        deferral.at_once -= 1


def run_tasks(tasks: Iterable[T], work: Callable[[T], R | Later], concurrency: int,
              on_done: Callable[[Outcome[T, R]], bool],
              on_interrupt: Callable[[int], None] | None = None,
              lanes: Lanes | None = None, lane_of: Callable[[T], Lane | None] | None = None,
              on_idle: Callable[[], None] | None = None) -> list[T]:
    """Run `work(task)` for every task with at most `concurrency` at once (or as `lanes` allow); `on_done` sees each
    outcome in the calling thread, False stops scheduling; `on_idle` is called whenever the calling thread is about to
    wait with no outcome to see (what `on_done` put off can be done then). Returns the tasks never started. Interrupts:
    docs/building.md (Details by module)."""
    lanes = lanes if lanes is not None else Lanes(concurrency)
    lane_of = lane_of or (lambda task: None)
    order = itertools.count()
    queued: dict[Lane | None, list[tuple[int, T]]] = {}  # per lane, (plan order, task): a heap
    for task in tasks:
        queued.setdefault(lane_of(task), []).append((next(order), task))
    waiting: list[tuple[float, int, T]] = []  # (when to try again, tie-break, task)
    # SimpleQueue: each hand-off from a worker is one C call, not a Condition's lock, notify and waiter list
    results: queue.SimpleQueue[Any] = queue.SimpleQueue()  # (Outcome, its lane), or _WAKE
    running = 0  # tasks started and not finished (paused ones included)
    stop = False
    interrupted = False
    lanes.on_free = lambda: results.put(_WAKE)
    lanes.restart()

    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    workers = 0

    def worker() -> None:
        # Long-lived: starting a thread per task cost the calling thread more than some tasks do.
        while (item := inbox.get()) is not _NO_MORE:
            task, lane = item
            try:
                with lanes.running(lane):
                    value = work(task)
                results.put((Outcome(task, value=value), lane))
            except BaseException as exc:  # noqa: BLE001 - reported to the caller, never swallowed
                results.put((Outcome(task, error=exc), lane))

    def next_task() -> tuple[T, Lane | None] | None:
        """The first task in plan order whose lane has a slot for it now (the slot is taken)."""
        if lanes.full():  # (after each outcome the loop asks again once the freed slot is taken: no lane to try)
            return None
        for lane in sorted((lane for lane in queued if queued[lane]), key=lambda lane: queued[lane][0][0]):
            if lanes.try_start(lane):
                return heapq.heappop(queued[lane])[1], lane
        return None

    # A first interrupt is only noted (and wakes the wait below), then taken up at the loop's top: raised where it
    # landed, it could cut an outcome's bookkeeping short and abandon the running tasks. SimpleQueue.put is
    # reentrant: safe in a signal handler.
    noted_only: contextlib.AbstractContextManager[list[int]] = contextlib.nullcontext([])
    if on_interrupt is not None:  # (without it, an interrupt propagates at once)
        noted_only = deferred_interrupts(lambda: results.put(_WAKE))
    try:
        with noted_only as noted:
            while any(queued.values()) or running or (waiting and not stop):
                if noted and not interrupted and on_interrupt is not None:
                    interrupted = stop = True
                    lanes.cancel()
                    on_interrupt(running)
                # What on_done put off (progress lines) is done before the next task is handed over, not after: a
                # worker woken first would wait for the interpreter lock through it (docs/scale/building.md, Session 63)
                if on_idle is not None and results.empty():
                    on_idle()
                now = time.monotonic()
                while waiting and not stop and waiting[0][0] <= now:  # set aside long enough: queued again
                    task = heapq.heappop(waiting)[2]
                    heapq.heappush(queued.setdefault(lane_of(task), []), (next(order), task))
                while not stop and (started := next_task()) is not None:
                    inbox.put(started)
                    running += 1
                    if running > workers:  # every worker is busy: one more
                        threading.Thread(target=worker, daemon=True, name="claw-task").start()
                        workers += 1
                # A timeout wakes the main thread for set-aside tasks and for lanes whose rate-limit hold ends.
                timeout = 0.2
                if waiting and not stop:
                    timeout = max(0.001, min(0.2, waiting[0][0] - time.monotonic()))
                try:
                    if running == 0:
                        if stop or not (waiting or any(queued.values())):
                            break
                        results.get(timeout=timeout)  # (a wake at most: an interrupt's or a lane's)
                        continue
                    result = results.get(timeout=timeout)
                except queue.Empty:
                    continue
                if result is _WAKE:
                    continue
                outcome, lane = result
                running -= 1
                later = isinstance(outcome.value, Later)
                lanes.finish(lane, completed=not later)  # (here, not in the worker: on_done may stop scheduling first)
                if later:
                    heapq.heappush(waiting, (time.monotonic() + outcome.value.delay_s, next(order), outcome.task))
                    continue
                if not on_done(outcome):
                    stop = True
    finally:
        lanes.on_free = None
        if on_idle is not None:
            on_idle()
        for _ in range(workers):
            inbox.put(_NO_MORE)  # each worker ends after its current task
    if interrupted:
        raise KeyboardInterrupt
    left = sorted(entry for heap in queued.values() for entry in heap)
    return [task for _, task in left] + [task for _, _, task in sorted(waiting)]
