"""Group commit: many puts share one durability barrier, and nothing is visible before it is durable.

The write order and why it is safe: docs/store.md (Commit: group commit and the write order)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from clawstore.store.core.index import ActionEntry, Loc, Segment, new_segment_name
from clawstore.store.core.packfile import PackWriter

DEFAULT_WINDOW_S = 0.25
DEFAULT_MAX_BATCHES = 256


class CommitTarget(Protocol):
    """What a commit needs of the store's runtime (runtime.py): its pack lock, pack writer and sync lock, the
    sync of the packs directory, the sealing of a full pack, and the publishing of an index segment."""

    pack_lock: AbstractContextManager[Any]
    sync_lock: AbstractContextManager[Any]

    def writer(self) -> PackWriter: ...

    def take_new_packs(self) -> bool: ...

    def sync_packs_dir(self, new_packs: bool) -> None: ...

    def seal_if_full(self) -> None: ...

    def publish(self, segment: Segment) -> None: ...


@dataclass
class Pending:
    """Blobs written but not yet named by the index, and action entries not yet published."""

    objects: dict[bytes, Loc] = field(default_factory=dict)
    actions: dict[bytes, tuple[bytes | None, int]] = field(default_factory=dict)  # key -> (record, time)
    written: dict[bytes, ActionEntry] = field(default_factory=dict)  # entries already in a pack
    writers: set[PackWriter] = field(default_factory=set)  # packs holding those blobs
    callbacks: list[Callable[[], None]] = field(default_factory=list)  # run once durable
    batches: int = 0
    object_rows: tuple[list[str], bytes] | None = None  # `objects` as segment rows made ahead (index.merged_runs)

    def absorb(self, other: Pending) -> None:
        self.object_rows = None  # (rows made for one commit's objects name no more)
        self.objects.update(other.objects)
        self.actions.update(other.actions)
        self.written.update(other.written)
        self.writers |= other.writers
        self.callbacks += other.callbacks
        self.batches += max(other.batches, 1)

    def empty(self) -> bool:
        return not (self.objects or self.actions or self.callbacks)


PRESENT_NOTED_MAX = 1024


@dataclass
class Batch(Pending):
    """Per-thread state of an open `Store.batch()`.

    `queued`: small objects put in it and not yet written, by digest (frame parts, the ids their content names): a
    node's objects go to the pack in one system call when the batch ends, or sooner (objects.py `_write_queued`).
    `present`: objects a put in it found in the store already (its pack touched for gc's grace): `has` answers them
    without a second look-up (put_action asks it of each output the node just put). At most `PRESENT_NOTED_MAX`
    (a node's batch notes a few; an archive import's one batch would otherwise note every object it holds already)."""

    depth: int = 0
    queued: dict[bytes, tuple[list[bytes | memoryview], list[bytes] | None]] = field(default_factory=dict)
    queued_bytes: int = 0
    present: set[bytes] = field(default_factory=set)


def write_entries(runtime: CommitTarget, pending: Pending) -> None:
    """Append `pending`'s action entries not yet in a pack to this process's pack (no fsync): from here
    they are in the store's files, and a SIGKILL cannot lose them (adopt.py)."""
    todo = unwritten_entries(pending)
    if not todo:
        return
    with runtime.pack_lock:
        writer = runtime.writer()
        pending.writers.add(writer)
        offsets = writer.append_actions(todo)
    note_written(pending, todo, writer.pack_id, offsets)


def unwritten_entries(pending: Pending) -> list[tuple[bytes, bytes | None, int]]:
    """`pending`'s action entries (key, record, time ns) not yet in a pack as they are now."""
    return [(key, *value) for key, value in pending.actions.items()
            if (entry := pending.written.get(key)) is None or (entry.record, entry.time_ns) != value]


def note_written(pending: Pending, entries: list[tuple[bytes, bytes | None, int]], pack: str,
                 offsets: list[int]) -> None:
    for (key, record, time_ns), offset in zip(entries, offsets, strict=True):
        pending.written[key] = ActionEntry(record, time_ns, pack, offset)


def commit(runtime: CommitTarget, pending: Pending) -> None:
    """Make `pending` durable, then visible (docs/store.md, Commit). The fsyncs hold the sync lock (one
    commit at a time), not the pack lock: other threads append to the pack meanwhile."""
    if pending.empty():
        return
    segment = Segment(new_segment_name(), objects=dict(pending.objects), object_rows=pending.object_rows)
    with runtime.sync_lock:
        with runtime.pack_lock:
            write_entries(runtime, pending)
            segment.actions = {key: pending.written[key] for key in pending.actions}
            ends = [(writer, writer.size) for writer in pending.writers if not writer.sealed]
            new_packs = runtime.take_new_packs()
        runtime.sync_packs_dir(new_packs)
        for writer, end in ends:  # (sealing and closing a writer take the sync lock too)
            writer.sync(end)
        with runtime.pack_lock:
            runtime.seal_if_full()
    if segment.objects or segment.actions:
        runtime.publish(segment)
    for callback in pending.callbacks:
        callback()


class _Round:
    """Batches of concurrent threads committed by one barrier (see SharedCommit)."""

    def __init__(self) -> None:
        self.pending = Pending()
        self.done = False
        self.error: BaseException | None = None


class SharedCommit:
    """Concurrent batches of one process share a barrier, each returning only once it is durable: the first to commit
    leads, later ones queue and one of them leads the next round. One barrier per round instead of per node; a failed
    round raises in each caller. Details: docs/store.md (Details by module)."""

    def __init__(self, runtime: CommitTarget):
        self.runtime = runtime
        self._cv = threading.Condition(threading.Lock())
        self._open = _Round()
        self._committing = False

    def commit(self, batch: Pending) -> None:
        with self._cv:
            mine = self._open
            mine.pending.absorb(batch)
            while not mine.done and self._committing:
                self._cv.wait()
            if mine.done:
                if mine.error is not None:
                    raise _again(mine.error)
                return
            self._committing = True  # lead: everything queued so far goes in this round
            self._open = _Round()
        try:
            commit(self.runtime, mine.pending)
        except BaseException as exc:
            mine.error = exc
            raise
        finally:
            with self._cv:
                mine.done = True
                self._committing = False
                self._cv.notify_all()


def _again(error: BaseException) -> BaseException:
    """The leader's error for a follower's own raise (one exception object is not raised in two threads)."""
    if isinstance(error, OSError):
        return OSError(error.errno, error.strerror)
    return error


class GroupCommitter:
    """The process's pending group in group mode: committed by size, by age (a timer), or on demand."""

    def __init__(self, runtime: CommitTarget, window_s: float, max_batches: int):
        self.runtime = runtime
        self.window_s = window_s
        self.max_batches = max_batches
        self.group = Pending()
        self.opened_at: float | None = None
        self.failed: BaseException | None = None  # the last commit's error, until one succeeds
        self.lock = threading.RLock()  # guards `group` and `flying`; never held through an fsync
        self.flying: Pending | None = None  # the group being committed: still found by lookups
        self._flushing = threading.Lock()  # one commit at a time, in order
        self._wake = threading.Condition(threading.Lock())
        self._stop = False
        self._thread = threading.Thread(target=self._timer, name="claw-group-commit", daemon=True)
        self._thread.start()

    def add(self, batch: Pending) -> None:
        """Write the batch's entries into the pack and join the pending group. Raises if they cannot be
        written, or the group cannot be committed (the last commit failed and so does a new try): the
        batch stays pending, and its writer learns now rather than never."""
        try:
            write_entries(self.runtime, batch)
        except OSError:
            with self.lock:
                self.opened_at = self.opened_at if self.opened_at is not None else time.monotonic()
                self.group.absorb(batch)  # (its entries are written by the commit that takes it)
            raise
        with self.lock:
            opening = self.opened_at is None
            if opening:
                self.opened_at = time.monotonic()
            self.group.absorb(batch)
            full = self.group.batches >= self.max_batches
        if full or self.failed is not None:
            self.flush()
        elif opening:  # the timer only needs to know when a window opens
            with self._wake:
                self._wake.notify()

    def add_callback(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the pending group is committed (joins it; never commits itself)."""
        with self.lock:
            opening = self.opened_at is None
            if opening:
                self.opened_at = time.monotonic()
            self.group.callbacks.append(callback)
        if opening:
            with self._wake:
                self._wake.notify()

    def flush(self) -> None:
        """Commit the pending group. Batches added meanwhile join the next group, and lookups find the
        group in flight: neither waits on the disk."""
        with self._flushing:
            with self.lock:
                group, self.group = self.group, Pending()
                opened, self.opened_at = self.opened_at, None
                self.flying = group
            try:
                commit(self.runtime, group)
            except BaseException as exc:
                with self.lock:
                    group.absorb(self.group)  # keep it for the next try; nothing of it is visible
                    self.group, self.opened_at, self.failed, self.flying = group, opened, exc, None
                raise
            with self.lock:
                self.flying, self.failed = None, None

    def abandon(self) -> None:
        """Drop what is pending (it could not be made durable and the caller has given up on it)."""
        with self.lock:
            self.group, self.opened_at, self.failed = Pending(), None, None

    def find_object(self, digest: bytes) -> Loc | None:
        with self.lock:
            loc = self.group.objects.get(digest)
            return loc if loc is not None or self.flying is None else self.flying.objects.get(digest)

    def find_action(self, key: bytes) -> tuple[bytes | None, int] | None:
        with self.lock:  # the newer group's entry first
            found = self.group.actions.get(key)
            return found if found is not None or self.flying is None else self.flying.actions.get(key)

    def _timer(self) -> None:
        while True:
            with self._wake:
                opened = self.opened_at
                wait = None if opened is None else opened + self.window_s - time.monotonic()
                if self._stop:
                    return
                if wait is None or wait > 0:
                    self._wake.wait(wait)
                    continue
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - the next add or the closing flush raises it in a caller
                time.sleep(self.window_s)

    def close(self) -> None:
        with self._wake:
            self._stop = True
            self._wake.notify()
        self._thread.join()
        self.flush()
