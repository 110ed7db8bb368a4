"""A deleting gc's held plan keeps each kept object as its index segment row (52 bytes, store/services/gc_kept.py), not
as a dict item (~260 bytes: its id as bytes, a (pack, offset, length) tuple, two ints, a slot); each kept entry likewise
(84 bytes, not ~340); without `listed` it counts the doomed objects and entries but makes no list of them; and since
session 60 the rows wait in a temporary file, so what the plan and the copy hold does not grow with the store."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store, reach_arrays
from clawstore.store.actions import key_digest, set_entries
from clawstore.store.core import index, runtime
from clawstore.store.core.ids import PREFIX
from clawstore.store.services import gc, gc_kept
from tests.support.fresh import in_fresh_process
from tests.support.storefiles import age_packs

KEPT = 20_000


def _store(root: Path) -> Store:
    """KEPT small objects a pin names (through 20 lists of 1,000), 100 nobody names: two hours old."""
    store = Store(root)
    with store.batch():
        lists = [store.put_json({"part": part, "ids": [store.put_bytes(b"kept %d %d" % (part, i))
                                                        for i in range(KEPT // 20)]}) for part in range(20)]
        for i in range(100):
            store.put_bytes(b"garbage %d" % i)
        store.set_ref("pins/all", store.put_json({"parts": lists}))
    store.runtime.close_writer()
    age_packs(store, 7200)
    return store


def _collect_measuring_the_plan(store: Store, monkeypatch: pytest.MonkeyPatch, **options: bool
                                ) -> tuple[gc.GcReport, list[tuple[int, int, int]]]:
    """A real gc of `store` (`collect`'s `options`); for each held plan, as it was made: the bytes it retained, its
    kept objects and its kept entries (a gc lets its rows go as it goes)."""
    held: list[tuple[int, int, int]] = []
    real_plan = gc._plan

    def plan(*args: object, **kwargs: object) -> gc._Plan:
        before = tracemalloc.get_traced_memory()[0]
        made = real_plan(*args, **kwargs)  # type: ignore[arg-type]
        if kwargs.get("held", True):
            held.append((tracemalloc.get_traced_memory()[0] - before, len(made.objects), len(made.actions)))
        return made

    monkeypatch.setattr(gc, "_plan", plan)
    tracemalloc.start()
    try:
        report = gc.collect(store, **options)
    finally:
        tracemalloc.stop()
    return report, held


@pytest.mark.timeout(120)
def test_the_held_plan_holds_a_kept_object_in_under_100_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path / "store")
    report, held = _collect_measuring_the_plan(store, monkeypatch)
    assert len(report.objects) == 100 and report.reachable == KEPT + 21
    [(retained, kept, _)] = held
    assert kept == KEPT + 21
    assert retained / kept < 100, retained / kept  # (the dict held 240-260 bytes an object)
    assert sum(1 for _ in Store(store.root, create=False).iter_objects()) == KEPT + 21


ENTRIES = 20_000


def _key(name: str) -> str:
    """An action key (the id of an input document that need not be stored)."""
    return PREFIX + hashlib.sha256(name.encode()).hexdigest()


def _store_with_entries(root: Path) -> Store:
    """ENTRIES action-cache entries whose record a pin names (kept), 1,000 whose record nobody names and 1,000
    objects nobody names (doomed): two hours old."""
    store = Store(root)
    with store.batch():
        record = store.put_json({"kind": "run", "outputs": {}})
        lost = [store.put_json({"kind": "run", "lost": i}) for i in range(1000)]
        for i in range(1000):
            store.put_bytes(b"garbage %d" % i)
        now = 1_700_000_000_000_000_000  # (long ago: no entry is kept for its age)
        entries = {key_digest(_key(f"key {i}")): (bytes.fromhex(record[len(PREFIX):]), now) for i in range(ENTRIES)}
        entries |= {key_digest(_key(f"lost {i}")): (bytes.fromhex(oid[len(PREFIX):]), now)
                    for i, oid in enumerate(lost)}
        set_entries(store, entries)
        store.set_ref("pins/record", record)
    store.runtime.close_writer()
    age_packs(store, 7200)
    return store


@pytest.mark.timeout(120)
def test_the_held_plan_holds_a_kept_entry_in_under_100_bytes_and_lists_nothing_unasked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = gc.collect(_store_with_entries(tmp_path / "listed"), dry_run=True)
    store = _store_with_entries(tmp_path / "store")
    report, held = _collect_measuring_the_plan(store, monkeypatch, listed=False)
    [(retained, _, entries)] = held
    assert entries == ENTRIES
    assert report.objects == [] and report.actions == []  # counted, not listed
    assert len(listed.objects) == 2000 and len(listed.actions) == 1000  # (the lost records, the garbage; their entries)
    assert (report.objects_deleted, report.object_bytes_deleted, report.actions_deleted) == (
        len(listed.objects), sum(size for _, size in listed.objects), len(listed.actions))
    # 84 bytes a row, the rest the 3,000 doomed (~40 bytes an entry here); main: 365 (the dict, and the lists)
    assert retained / ENTRIES < 150, retained / ENTRIES
    assert sum(1 for _ in Store(store.root, create=False).iter_actions()) == ENTRIES


@pytest.mark.timeout(120)
def test_the_held_plan_holds_a_doomed_object_in_under_100_bytes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    with store.batch():
        for i in range(KEPT):  # nobody names them
            store.put_bytes(b"garbage %d" % i)
        store.set_ref("pins/one", store.put_bytes(b"kept"))
    store.runtime.close_writer()
    age_packs(store, 7200)
    report, held = _collect_measuring_the_plan(store, monkeypatch, listed=False)
    assert report.objects_deleted == KEPT and report.objects == []
    [(retained, _, _)] = held
    assert retained / KEPT < 100, retained / KEPT  # (a dict item held ~200 bytes, its line in the list ~190)
    assert sum(1 for _ in Store(store.root, create=False).iter_objects()) == 1


def _store_of(root: Path, kept: int) -> Store:
    """`kept` small objects a pin names (through lists of 1,000) and as many entries whose record it names, a fifth of
    each nobody names (doomed), in packs of 64 KiB: two hours old."""
    store = Store(root)
    now = 1_700_000_000_000_000_000  # (long ago: no entry is kept for its age)
    with store.batch():
        lists = [store.put_json({"part": part, "ids": [store.put_bytes(b"kept %d %d" % (part, i))
                                                        for i in range(1000)]}) for part in range(kept // 1000)]
        record = store.put_json({"kind": "run", "outputs": {}})
        lost = bytes.fromhex(store.put_json({"kind": "run", "lost": True})[len(PREFIX):])
        for i in range(kept // 5):
            store.put_bytes(b"garbage %d" % i)
        entries = {key_digest(_key(f"key {i}")): (bytes.fromhex(record[len(PREFIX):]), now) for i in range(kept)}
        entries |= {key_digest(_key(f"lost {i}")): (lost, now) for i in range(kept // 5)}
        set_entries(store, entries)
        store.set_ref("pins/all", store.put_json({"parts": lists, "record": record}))
    store.runtime.close_writer()
    age_packs(store, 7200)
    return store


def _plan_and_copy_peak(store: Store, monkeypatch: pytest.MonkeyPatch) -> tuple[int, gc.GcReport]:
    """(the most traced from the held plan's start to the index swap (the old segments removed), above what was traced
    at that start (the walk's state, let go before the copy); the report) of a real gc of `store`. Not the index
    loaded again after the swap, as every command loads it: its peak is the new segment's checksum, read 1 MiB at a
    time with two reads held at once, so ~2 MiB past a 2 MiB segment whatever the store. These two stores' segments
    (0.5 and 2.7 MB at 4,000 and 20,000 kept, as they were) straddle that, and it read as ~48 bytes a row once the
    walk's rows (52 bytes each, let go in this window) no longer hid it, in session 61."""
    seen: dict[str, int] = {}
    real_plan, real_remove = gc._plan, gc.remove_segments

    def plan(*args: object, **kwargs: object) -> gc._Plan:
        if kwargs.get("held", True):
            seen["start"] = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        return real_plan(*args, **kwargs)  # type: ignore[arg-type]

    def swapped(*args: object) -> None:
        real_remove(*args)  # type: ignore[arg-type]
        seen["peak"] = tracemalloc.get_traced_memory()[1] - seen["start"]

    monkeypatch.setattr(gc, "_plan", plan)
    monkeypatch.setattr(gc, "remove_segments", swapped)
    tracemalloc.start()
    try:
        report = gc.collect(store, listed=False)
    finally:
        tracemalloc.stop()
    return seen["peak"], report


def test_what_a_deleting_gc_plans_and_copies_with_does_not_grow_with_the_store(tmp_path: Path) -> None:
    # A new interpreter: a pytest worker's history has inflated tracemalloc's figures in-process before.
    in_fresh_process(__name__, "_held_by_the_store_size", tmp_path, timeout=600)


def _held_by_the_store_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every constant buffer shrunk, so that these stores outgrow them as a big store does the real ones: the rows held
    # before they are written (16,384), the moved rows taken in pack order at once (65,536), the entries and objects
    # asked whether reached at once (4,096), the index's rows read at once (16,384) and the packs the copy fills
    # (32 MiB, 131,072 ids, 65,536 blobs).
    monkeypatch.setattr(gc_kept, "SPILL_ROWS", 256)
    monkeypatch.setattr(gc_kept, "COPY_ROWS", 1024)
    monkeypatch.setattr(gc, "_ASKED_AT_ONCE", 256)
    monkeypatch.setattr(index, "_STREAM_ROWS", 256)
    monkeypatch.setattr(reach_arrays, "ROWS_READ", 256)
    monkeypatch.setattr(runtime, "PACK_TARGET", 64 << 10)
    monkeypatch.setattr(runtime, "EDGES_TARGET", 1 << 10)
    monkeypatch.setattr(gc, "COPY_PACK_BLOBS", 256)
    peaks = {}
    # The code before the rows waited in a file (fa8211f3^) grows 212 bytes an object at these sizes (282 at 4,000 /
    # 20,000); this code shrinks 16.
    for kept in (2000, 10000):
        store = _store_of(tmp_path / str(kept), kept)
        peaks[kept], report = _plan_and_copy_peak(store, monkeypatch)
        deleted = (report.objects_deleted, report.actions_deleted, report.packs_rewritten)
        assert deleted[:2] == (kept // 5 + 1, kept // 5) and deleted[2], deleted  # (the garbage and the lost record)
        fresh = Store(store.root, create=False)
        assert sum(1 for _ in fresh.iter_objects()) == kept + kept // 1000 + 2  # (the lists, the record, the pin)
        assert sum(1 for _ in fresh.iter_actions()) == kept
    # 8,000 objects and 8,000 entries more kept, 3,200 more doomed: the rows in memory held 52 bytes a kept or doomed
    # object and 84 a kept entry (~1.7 MB more; 340 an entry and 260 an object as dicts before session 59)
    per_object = (peaks[10000] - peaks[2000]) / 8000
    assert per_object < 8, f"{per_object:.1f} bytes an object more, peaks {peaks}"
