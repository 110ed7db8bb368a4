"""A big index segment's lookup (its fan-out and tags) is built once, however many threads first ask at once: a merge's
new segment is asked by every worker of a build together, and each building its own was the build's highest RSS
(docs/scale/building.md, Session 56)."""

from __future__ import annotations

import random
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from clawstore.store.core import index
from clawstore.store.core.index import ActionEntry, Entries, Segment, Table, new_segment_name, open_table, write_segment
from tests.support.fresh import measured_in_fresh_process

PACK = bytes(16).hex()
THREADS = 8


def _table(tmp_path: Path, objects: int, actions: int) -> tuple[Table, Segment]:
    rng = random.Random(56)
    segment = Segment(new_segment_name())
    for _ in range(objects):
        segment.objects[rng.randbytes(32)] = (PACK, rng.randrange(1 << 40), rng.randrange(1 << 20))
    for _ in range(actions):
        segment.actions[rng.randbytes(32)] = ActionEntry(rng.randbytes(32), rng.randrange(1 << 60), PACK, 7)
    index_dir = tmp_path / "index"
    index_dir.mkdir(parents=True)
    write_segment(index_dir, tmp_path, segment)
    return open_table(index_dir, segment.name), segment


@pytest.fixture
def slow_fanouts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    return _slowed(monkeypatch)


def _slowed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every fan-out built, by row count; each build slowed, so that threads asking together overlap for sure."""
    built: list[int] = []
    fanout = index._fanout

    def slow(tops: Iterable[tuple[int]], n: int, where: str) -> tuple[object, int]:
        built.append(n)
        time.sleep(0.05)
        return fanout(tops, n, where)

    monkeypatch.setattr(index, "_fanout", slow)
    return built


def _together(asks: list[Callable[[], object]]) -> list[object]:
    """Each ask in a thread of its own, all released at once; their answers in order."""
    answers: list[object] = [None] * len(asks)
    start = threading.Barrier(len(asks))

    def run(at: int) -> None:
        start.wait()
        answers[at] = asks[at]()

    threads = [threading.Thread(target=run, args=(at,)) for at in range(len(asks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def _firsts(items: Iterable[tuple[bytes, object]], n: int) -> Iterator[tuple[bytes, object]]:
    it = iter(items)
    return (next(it) for _ in range(n))


def test_threads_asking_a_new_table_at_once_build_its_lookups_once(tmp_path: Path, slow_fanouts: list[int]) -> None:
    table, segment = _table(tmp_path, 20_000, 10_000)
    entries = Entries(tables=(table,))
    objects = list(_firsts(iter(segment.objects.items()), THREADS))
    actions = list(_firsts(iter(segment.actions.items()), THREADS))
    found = _together([lambda digest=digest: entries.find_object(digest) for digest, _ in objects])
    assert found == [loc for _, loc in objects]
    assert slow_fanouts == [20_000]  # (one build; each thread built its own before: THREADS of them)
    found = _together([lambda key=key: entries.find_action(key) for key, _ in actions])
    assert found == [entry for _, entry in actions]
    assert slow_fanouts == [20_000, 10_000]
    assert entries.find_object(bytes(32)) is None and slow_fanouts == [20_000, 10_000]  # (a miss: built already)


def _peak_of(ask: Callable[[], object], threads: int) -> int:
    """Bytes allocated at the peak while `threads` threads ask at once (tracemalloc: every thread's allocations)."""
    tracemalloc.start()
    try:
        _together([ask] * threads)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def peaks_alone(root: str) -> tuple[int, int]:
    """The peaks of one thread asking a new table, and of THREADS threads asking another at once. Called in a new
    interpreter (measured_in_fresh_process): in a test worker, the threads earlier tests left allocate too, and
    tracemalloc counts every thread's allocations."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _slowed(monkeypatch)
        alone, _ = _table(Path(root) / "alone", 60_000, 0)
        shared, segment = _table(Path(root) / "shared", 60_000, 0)
        digest = next(iter(segment.objects))
        one = _peak_of(lambda: Entries(tables=(alone,)).find_object(digest), 1)
        return one, _peak_of(lambda: Entries(tables=(shared,)).find_object(digest), THREADS)


def test_what_threads_asking_a_new_table_at_once_hold_is_one_build(tmp_path: Path) -> None:
    """The batch of rows read, the tags and the fan-out: one build's worth at the peak, not one a thread."""
    one, many = measured_in_fresh_process(peaks_alone, tmp_path)
    assert one > 300_000  # (the tags alone are 120 kB, the fan-out 512 kB: the build is what is measured)
    assert many < 1.5 * one, f"{THREADS} threads held {many} bytes at their peak, one thread {one}"


@pytest.mark.parametrize("fault", [lambda: index.BadSegmentError("index segment x is not sorted"), MemoryError],
                         ids=["bad_segment", "memory"])
def test_a_build_that_raises_leaves_no_thread_waiting_and_nothing_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Callable[[], BaseException]) -> None:
    """A lookup's build that raises (a hostile or cut-short segment, memory short): every thread that asked gets the
    error, none is left waiting on the lock, and nothing half-built is kept: once the cause is gone, it builds."""
    table, segment = _table(tmp_path, 2_000, 0)
    entries = Entries(tables=(table,))
    digest, loc = next(iter(segment.objects.items()))
    fanout, failing = index._fanout, [True]

    def faulty(tops: Iterable[tuple[int]], n: int, where: str) -> tuple[object, int]:
        time.sleep(0.05)  # (the others ask meanwhile: they wait on the lock)
        if failing[0]:
            raise fault()  # (a new one each time: one kept in the parameters kept its traceback's frames, and the
            #                 segment files they held open, until the process ended)
        return fanout(tops, n, where)

    monkeypatch.setattr(index, "_fanout", faulty)
    answers: list[object] = [None] * THREADS
    start = threading.Barrier(THREADS)

    def ask(at: int) -> None:
        start.wait()
        try:
            answers[at] = entries.find_object(digest)
        except BaseException as exc:  # noqa: BLE001 - what each thread got is the point
            answers[at] = exc

    threads = [threading.Thread(target=ask, args=(at,), daemon=True) for at in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads), "a thread still waits for a build that raised"
    assert all(type(answer) is type(fault()) for answer in answers), answers
    assert table._objects is None  # (nothing half-built kept)
    failing[0] = False
    assert entries.find_object(digest) == loc and table._objects is not None
