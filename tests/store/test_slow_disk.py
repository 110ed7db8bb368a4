"""A slow fsync holds back only the commit waiting on it: other threads' lookups and puts go on, and
nothing of the group is visible to other processes or reported durable before its fsync returned."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.actions import key_digest, set_entries
from tests.support.storefiles import visible_elsewhere

KEY = "blake3:" + "ab" * 32
PATIENCE_S = 5.0  # how long a lookup may take before the test calls it blocked (a loaded machine)


class StuckDisk:
    """os.fsync that, once armed, blocks (or fails) until released: a disk taking its time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.real = os.fsync
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()
        self.error: OSError | None = None
        monkeypatch.setattr(os, "fsync", self.fsync)

    def fsync(self, fd: int) -> None:
        if self.armed:
            self.entered.set()
            self.release.wait(30)
            if self.error is not None:
                raise self.error
        self.real(fd)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[StuckDisk]:
    stuck = StuckDisk(monkeypatch)
    yield stuck
    stuck.release.set()


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _within(work: Callable[[], object]) -> object:
    """`work()`'s result if it returns within PATIENCE_S (else the test fails: it waited on the disk)."""
    thread, out = _in_thread(work)
    thread.join(PATIENCE_S)
    assert not thread.is_alive(), "a lookup or put waited for another thread's fsync"
    return out[0]


def test_lookups_and_puts_go_on_while_a_commit_waits_on_its_fsync(store: Store, disk: StuckDisk) -> None:
    durable: list[bool] = []
    with store.group_commit(window_s=60, max_batches=1000):
        with store.batch():
            first = store.put_bytes(b"committed while the disk is slow")
            set_entries(store, {key_digest(KEY): (key_digest(first), time.time_ns())})
        store.when_durable(lambda: durable.append(visible_elsewhere(store, first)))
        disk.armed = True
        flusher, flushed = _in_thread(store.flush)
        assert disk.entered.wait(PATIENCE_S)

        assert _within(lambda: store.has(first)) is True  # read-your-own-writes, from the group in flight
        assert _within(lambda: store.get_bytes(first)) == b"committed while the disk is slow"
        assert _within(lambda: store.get_action_record_id(KEY)) == first

        def put_another() -> str:
            with store.batch():
                return store.put_bytes(b"put while the disk is slow")
        second = _within(put_another)
        assert _within(lambda: store.put_bytes(b"committed while the disk is slow")) == first  # a dedup hit

        # Durable before visible: nothing of the group is named, nor reported, while its fsync runs.
        assert not visible_elsewhere(store, first) and durable == []
        disk.armed = False
        disk.release.set()
        flusher.join(PATIENCE_S)
        assert flushed == [None]
        assert visible_elsewhere(store, first) and durable == [True]
        assert not visible_elsewhere(store, second)  # it joined the next group
        store.flush()
        assert visible_elsewhere(store, second)


def test_a_failed_fsync_keeps_the_group_and_lookups_find_it(store: Store, disk: StuckDisk) -> None:
    with store.group_commit(window_s=60, max_batches=1000):
        with store.batch():
            oid = store.put_bytes(b"the disk refuses this once")
        disk.armed = True
        disk.error = OSError(errno.EIO, "Input/output error")
        disk.release.set()
        with pytest.raises(StoreError, match="Input/output error"):
            store.flush()
        assert store.has(oid) and not visible_elsewhere(store, oid)  # pending, never named
        disk.armed, disk.error = False, None
        store.flush()
        assert visible_elsewhere(store, oid)


def test_threads_putting_through_slow_commits_all_end_up_named(store: Store,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each fsync takes 10 ms while four threads put and commits start by size and by age: every object is
    found by its putter at once, and named in the index once the group is closed."""
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (time.sleep(0.01), real(fd))[1])
    ids: list[str] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for i in range(100):
            with store.batch():
                oid = store.put_bytes(b"thread %d item %d" % (n, i))
            assert store.has(oid)
            with lock:
                ids.append(oid)

    with store.group_commit(window_s=0.01, max_batches=7):
        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(ids) == 400 and all(visible_elsewhere(store, oid) for oid in ids)
