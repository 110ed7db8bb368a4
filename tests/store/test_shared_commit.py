"""Concurrent batches of one process share a durability barrier, and each returns only when durable.

A build executes several nodes at once; each node's batch used to pay its own barrier (pack fsync,
directory fsync, an index segment). Batches that end while a commit runs now join the next round.
"""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.core import batch
from clawstore.store.core.index import list_segments
from tests.support.storefiles import visible_elsewhere

THREADS = 8


def _slow_commits(monkeypatch: pytest.MonkeyPatch, fail_first: bool = False) -> list[int]:
    """Count the barriers (rounds) and make each take a while, as an fsync under load does."""
    real = batch.commit
    rounds: list[int] = []

    def slow(runtime, pending):  # type: ignore[no-untyped-def]
        rounds.append(len(pending.objects))
        time.sleep(0.05)
        if fail_first and len(rounds) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(runtime, pending)

    monkeypatch.setattr(batch, "commit", slow)
    return rounds


def _together(work) -> list[BaseException | None]:  # type: ignore[no-untyped-def]
    start = threading.Barrier(THREADS)
    errors: list[BaseException | None] = [None] * THREADS

    def run(n: int) -> None:
        start.wait()
        try:
            work(n)
        except BaseException as exc:  # noqa: BLE001 - the test looks at what each thread got
            errors[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_concurrent_batches_share_rounds_and_return_durable(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    rounds = _slow_commits(monkeypatch)
    durable_on_return: list[bool] = []

    def node(n: int) -> None:
        with store.batch():
            oid = store.put_bytes(b"node %d output" % n)
        durable_on_return.append(visible_elsewhere(store, oid))  # another process sees it already

    assert _together(node) == [None] * THREADS
    assert durable_on_return == [True] * THREADS
    assert sum(rounds) == THREADS and len(rounds) < THREADS, rounds  # rounds held several batches
    assert len(list_segments(store.root / "index")) == len(rounds)  # one index segment per round


def test_a_failed_round_raises_in_every_batch_of_it_and_shows_none(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    rounds = _slow_commits(monkeypatch, fail_first=True)
    written: dict[int, str] = {}

    def node(n: int) -> None:
        with store.batch():
            written[n] = store.put_bytes(b"node %d answer" % n)

    errors = _together(node)
    failed = [n for n, e in enumerate(errors) if e is not None]
    assert failed and len(failed) == rounds[0], (rounds, errors)  # exactly the first round's batches
    for n in failed:
        assert isinstance(errors[n], StoreError) and "No space left on device" in str(errors[n])
        assert not visible_elsewhere(store, written[n])
    for n in set(range(THREADS)) - set(failed):
        assert visible_elsewhere(store, written[n])
    with store.batch():  # the caller retries its write: now it goes in
        again = store.put_bytes(b"node %d answer" % failed[0])
    assert again == written[failed[0]] and visible_elsewhere(store, again)
