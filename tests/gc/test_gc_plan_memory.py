"""A deleting gc's held plan keeps each kept object as its index segment row (52 bytes, store/services/gc_kept.py), not
as a dict item (~260 bytes: its id as bytes, a (pack, offset, length) tuple, two ints, a slot); each kept entry likewise
(84 bytes, not ~340); and without `listed` it counts the doomed objects and entries but makes no list of them."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.actions import key_digest, set_entries
from clawstore.store.core.ids import PREFIX
from clawstore.store.services import gc
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
