"""Nodes run in the build's own thread (checks, results: `execute_nodes(here=True)`) share one store batch, up to
`GROUP_NODES` of them: one write of their objects and entries and one hand-over to the group commit instead of one
each (a node's batch end cost about a tenth of its work). Each node is still reported only once its record is
written (it survives SIGKILL): the outcomes wait for the batch's end. Details: docs/building.md (Details by module).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from clawstore.builder.scheduler import Outcome
from clawstore.builder.unstored import is_store_failure

if TYPE_CHECKING:
    from clawstore.store.store import Store

T = TypeVar("T")

GROUP_NODES = 32  # nodes a batch holds: ~100 objects of ~1 KB, below a batch's queue (objects.py QUEUE_MAX_*)


class Together:
    """Wraps `run_here`'s `work`, `on_done` and `on_idle`: the work of consecutive tasks runs in one open store batch
    (their own batches nest in it), their outcomes are held until it ends, then handed to `on_done` in order.

    `needs_write(value)`: does the outcome's value stand on what the task wrote (a record it stored), or not (adopted
    from another build, set aside)? If the batch cannot be written (or a task's store write failed, which may have
    lost what the tasks before it queued), nothing of it is kept: each held outcome that needs it becomes that
    store failure, as if its own batch had failed. Another error of a task is its own outcome: its own batch, nested,
    takes what it put and entered out of the open one as it raises (store/core/objects.py `batch`)."""

    def __init__(self, store: Store, on_done: Callable[[Outcome[T, Any]], bool],
                 needs_write: Callable[[Any], bool], size: int = GROUP_NODES):
        self.store = store
        self._on_done = on_done
        self._needs_write = needs_write
        self.size = size
        self._batch: contextlib.AbstractContextManager[None] | None = None
        self._held: list[Outcome[Any, Any]] = []
        self.stopped = False  # an outcome handed on at the batch's end stopped the scheduling

    def work(self, work: Callable[[T], Any]) -> Callable[[T], Any]:
        def in_batch(task: T) -> Any:
            if self._batch is None:
                self._batch = self.store.batch()
                self._batch.__enter__()
            return work(task)
        return in_batch

    def on_done(self, outcome: Outcome[Any, Any]) -> bool:
        if outcome.error is not None and is_store_failure(outcome.error):
            self._end(outcome.error)
            return self._hand_on([outcome])
        self._held.append(outcome)
        if len(self._held) >= self.size:
            return self.flush()
        return True

    def flush(self) -> bool:
        """End the batch (its write), then hand on what it held: False if `on_done` said stop."""
        try:
            self._end(None)
        except BaseException as exc:
            if not isinstance(exc, Exception):
                raise
            return self._hand_on([], failed=exc)
        return self._hand_on([])

    def idle(self, then: Callable[[], None] | None) -> Callable[[], None]:
        def idle() -> None:
            if not self.flush():
                self.stopped = True
            if then is not None:
                then()
        return idle

    def abandon(self, error: BaseException) -> None:
        """The run was cut short (a second Ctrl-C): nothing held is written or reported."""
        self._held = []
        with contextlib.suppress(Exception):
            self._end(error)

    def _end(self, error: BaseException | None) -> None:
        batch, self._batch = self._batch, None
        if batch is None:
            return
        if error is None:
            batch.__exit__(None, None, None)
            return
        with contextlib.suppress(BaseException):  # (it raises `error` again: a batch ended so keeps nothing)
            batch.__exit__(type(error), error, error.__traceback__)

    def _hand_on(self, last: list[Outcome[Any, Any]], failed: BaseException | None = None) -> bool:
        """Every held outcome, then `last`, to `on_done` (each one: a later one may be a record already durable)."""
        held, self._held = self._held, []
        if failed is None and last and last[0].error is not None:
            failed = last[0].error
        go_on = True
        for outcome in [*held, *last]:
            if failed is not None and outcome.error is None and self._needs_write(outcome.value):
                outcome = Outcome(outcome.task, error=failed)
            go_on = self._on_done(outcome) and go_on
        self.stopped = self.stopped or not go_on
        return go_on
