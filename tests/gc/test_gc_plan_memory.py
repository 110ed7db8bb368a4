"""A deleting gc's held plan keeps each kept object as its index segment row (52 bytes, store/services/gc_kept.py), not
as a dict item (~260 bytes: its id as bytes, a (pack, offset, length) tuple, two ints, a slot)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store
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


@pytest.mark.timeout(120)
def test_the_held_plan_holds_a_kept_object_in_under_100_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path / "store")
    held: list[tuple[int, int]] = []
    real_plan = gc._plan

    def plan(*args: object, **kwargs: object) -> gc._Plan:
        before = tracemalloc.get_traced_memory()[0]
        made = real_plan(*args, **kwargs)  # type: ignore[arg-type]
        if kwargs.get("held", True):
            held.append((tracemalloc.get_traced_memory()[0] - before, len(made.objects)))
        return made

    monkeypatch.setattr(gc, "_plan", plan)
    tracemalloc.start()
    try:
        report = gc.collect(store)
    finally:
        tracemalloc.stop()
    assert len(report.objects) == 100 and report.reachable == KEPT + 21
    [(retained, kept)] = held
    assert kept == KEPT + 21
    assert retained / kept < 100, retained / kept  # (the dict held 240-260 bytes an object)
    assert sum(1 for _ in Store(store.root, create=False).iter_objects()) == KEPT + 21
