"""Paid answers the store could not take (disk full, quota, I/O error).

A provider answer is paid for the moment it arrives. If the store then refuses to write it, the build
stops starting new nodes at once, keeps every such answer in memory (with the sandbox it came with),
retries writing them for a while (`CLAW_STORE_RETRY_SECONDS`, default 120) so that freeing space
saves them, and otherwise names exactly which paid answers were lost and what they cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError
from clawstore.graph.plan import Node, address_id
from clawstore.host.machine_settings import store_retry_seconds
from clawstore.store.core.reserve import is_space_error
from clawstore.values.costs import PAID_KINDS, CostSum

if TYPE_CHECKING:
    from clawstore.builder.buildlog import BuildLog
    from clawstore.store.store import Store

RETRY_PAUSE_S = 1.0
Stored = tuple[str, dict[str, Any]]  # (record id, record)


class UnstoredAnswer(Exception):
    """A node's answer (already paid for) is in memory; the store refused to write it."""

    def __init__(self, node: Node, cause: BaseException, write: Callable[[], Stored], cost_usd: float | None,
                 cleanup: Callable[[], None]):
        super().__init__(_reason(cause))
        self.node, self.write, self.cost_usd, self.cleanup = node, write, cost_usd, cleanup


class UnrecordedAnswer(Exception):
    """A node's answer was paid for, then its record could not be made (its metrics past a record's bounds, a
    fault of the harness): the node fails, and its cost counts as what the answer reported, else unknown."""

    def __init__(self, cause: Exception, cost_usd: float | None):
        super().__init__(str(cause))
        self.cause, self.cost_usd = cause, cost_usd


def store_answer(node: Node, write: Callable[[], Stored], cost_usd: float | None,
                 cleanup: Callable[[], None] = lambda: None) -> Stored:
    """`write()` the node's outputs and record; if the store fails, raise UnstoredAnswer holding `write`
    so the build can try again later (`cleanup` runs once the answer is stored or given up); if anything else
    fails, UnrecordedAnswer (the answer's cost still counts)."""
    try:
        stored = write()
    except (StoreError, OSError) as exc:
        raise UnstoredAnswer(node, exc, write, cost_usd, cleanup) from None
    except Exception as exc:
        cleanup()
        raise UnrecordedAnswer(exc, cost_usd) from exc
    cleanup()
    return stored


def unrecorded_cost(kind: str, error: BaseException) -> CostSum | None:
    """What a node that failed without a record spent: None for a node that calls no provider; the cost its
    answer reported when the error holds its answer; else unknown (it may have paid: never 0)."""
    if kind not in PAID_KINDS:
        return None
    return CostSum.of(getattr(error, "cost_usd", None)) if isinstance(error, UnstoredAnswer | UnrecordedAnswer) \
        else CostSum(unknown=1)


def _reason(exc: BaseException) -> str:
    """The cause in a few words ("No space left on device"), without the store path said elsewhere."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, UnstoredAnswer):
        return str(exc)
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("store ") and ": " in text else text


class NotStarted(StoreError):
    """The store failed before the node did anything that costs (e.g. its work claim could not be
    written): the node counts as not started, like every node after it."""


def is_store_failure(error: BaseException) -> bool:
    return isinstance(error, (UnstoredAnswer, StoreError))


class StoreTrouble:
    """A build's store write failures: once one happens nothing new starts; kept answers are retried."""

    def __init__(self, store_root: str, retry_seconds: float | None = None,
                 on_full: Callable[[], object] | None = None, say: Callable[[str], None] | None = None):
        self.store_root = store_root
        self.say = say or (lambda _line: None)  # where its warnings go (the command's stderr)
        self.on_full = on_full  # gives up the store's reserve of space, so what is paid fits
        if retry_seconds is None:
            retry_seconds = store_retry_seconds()
        self.retry_seconds = retry_seconds
        self.reason: str | None = None
        self.kept: list[UnstoredAnswer] = []
        self.lost: list[UnstoredAnswer] = []
        self.unkept = 0  # checks and results whose records were lost with a window: free, computed again
        self.saved = 0

    @property
    def failed(self) -> bool:
        return self.reason is not None

    def note(self, error: BaseException) -> None:
        if self.on_full is not None and is_space_error(error):
            self.on_full()
        self.reason = self.reason or _reason(error)
        if isinstance(error, UnstoredAnswer):
            self.kept.append(error)

    def retry(self, on_stored: Callable[[Node, Stored], None]) -> None:
        """Write the kept answers, retrying until they are all stored or the time is up."""
        if not self.kept:
            return
        self.say(f"claw: warning: the store cannot be written ({self.reason}): no new node is started; "
                 f"{len(self.kept)} paid answer(s) are kept in memory and retried for up to "
                 f"{self.retry_seconds:g} s — free space in {self.store_root}")
        deadline = time.monotonic() + self.retry_seconds
        while True:
            for answer in list(self.kept):
                try:
                    stored = answer.write()
                except (StoreError, OSError):
                    continue
                answer.cleanup()
                self.kept.remove(answer)
                self.saved += 1
                on_stored(answer.node, stored)
            if not self.kept or time.monotonic() >= deadline:
                break
            time.sleep(RETRY_PAUSE_S)
        for answer in self.kept:
            answer.cleanup()
        self.lost += self.kept
        self.kept = []
        if self.saved:
            self.say(f"claw: note: {self.saved} kept answer(s) stored after all")

    def error(self, skipped: int) -> StoreError:
        """The one line the build ends with: what was lost, what was not started."""
        if self.lost:
            cost = CostSum.total(CostSum.of(a.cost_usd) for a in self.lost)  # the provider's; else unknown
            names = ", ".join(f"{address_id(a.node.kind, a.node.address)} ({CostSum.of(a.cost_usd).cell(6)} USD)"
                              for a in self.lost)
            lost = (f"{len(self.lost)} paid answer(s) could not be stored and are lost "
                    f"({cost.usd_text()}): {names}")
        else:
            lost = "no paid answer was lost"
        if self.unkept:
            lost += f" ({self.unkept} check or result record(s) not kept either: free, computed again)"
        return StoreError(f"store {self.store_root} cannot be written ({self.reason}): {lost}; "
                          f"{skipped} node(s) not started; free space and build again (finished nodes are kept)")


def settle_pending(store: Store, log: BuildLog, trouble: StoreTrouble) -> None:
    """At the end of a build in group-commit mode: make the last window durable, retrying while the
    store refuses (like kept answers); if it never takes it, every recorded node whose record is not
    in the store is a paid answer lost, turned into a failed node and named by `trouble.error`."""
    deadline = time.monotonic() + trouble.retry_seconds
    cause: BaseException | None = None
    kept = 0  # recorded answers waiting when the store first refused
    while True:
        try:
            store.flush()  # (the commit timer may have got them in meanwhile: then this has nothing to do)
            if kept:
                trouble.say(f"claw: note: {kept} kept answer(s) stored after all")
            return
        except (StoreError, OSError) as exc:
            if cause is None:
                kept = len(log.not_durable())
                if kept:
                    trouble.say(f"claw: warning: the store cannot be written ({_reason(exc)}): {kept} recorded "
                                f"answer(s) are kept in memory and retried for up to {trouble.retry_seconds:g} s "
                                f"— free space in {trouble.store_root}")
            cause = exc
            trouble.note(exc)
        if time.monotonic() >= deadline:
            break
        time.sleep(RETRY_PAUSE_S)
    store.abandon_pending()
    for node in log.not_durable():
        if node.record_id and store.has(node.record_id):
            continue  # committed in an earlier window; only its notice was in the lost one
        log.unstore(node)
        cost = ((node.record or {}).get("metrics") or {}).get("cost_usd")
        node.action, node.error = "fail", f"StoreError: {_reason(cause)}"
        if node.kind in PAID_KINDS:
            trouble.lost.append(UnstoredAnswer(node, cause, _gone, cost, lambda: None))
        else:  # (a check's or result's record: nothing paid, computed again for free; it was named a paid answer lost,
            trouble.unkept += 1  # its cost "?" making the lost sum unknown)


def _gone() -> Stored:
    raise StoreError("the answer was not kept")
