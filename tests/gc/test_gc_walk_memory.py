"""What gc's finished walk holds grows by a few bytes an object, not by the index's object rows: since session 61 the
walk by arrays holds each big table's sort keys (8 bytes a row) beside its marks (a byte a row) and reads the rows it
matches in place (store/reach_arrays.py, `rows_at`), where it held the rows themselves (52 bytes each, plus the keys).
Measured in a new interpreter: a test worker's history inflates tracemalloc's figures in-process."""

from __future__ import annotations

import tracemalloc
from importlib import import_module
from pathlib import Path

from clawstore.store import Store
from clawstore.store.reach import Reach
from tests.support.fresh import measured_in_fresh_process

PART = 1000  # objects a list names (the pin names the lists)


def _store(root: Path, objects: int) -> Store:
    """`objects` small objects a pin names through lists of PART, all in the index's big tables."""
    store = Store(root)
    with store.batch():
        lists = [store.put_json({"part": part, "ids": [store.put_bytes(b"object %d %d" % (part, i))
                                                        for i in range(PART)]}) for part in range(objects // PART)]
        store.set_ref("pins/all", store.put_json({"parts": lists}))
    store.runtime.close_writer()
    return store


def _walk_state(root: str, objects: str) -> int:
    """The bytes traced that a cached walk (gc's) of a store of `objects` objects holds once it is done."""
    made = _store(Path(root), int(objects))
    store = Store(made.root, create=False)
    store.runtime.index.reload()  # (the index every command loads: not the walk's)
    pin = store.get_ref("pins/all")
    import_module("clawstore.store.reach_arrays")  # (numpy, imported by the walk: the same at every size)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        reach = Reach(store, cached=True)
        reach.mark([pin])
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    tables = store.runtime.index.snapshot().entries
    assert len(reach) == int(objects) + int(objects) // PART + 1  # (every object, its list, the pin's)
    assert tables.tables and not tables.objects  # (all in big tables: what the walk holds keys of)
    return held


def test_the_finished_walk_holds_a_few_bytes_an_object_not_the_index_rows(tmp_path: Path) -> None:
    held = {n: measured_in_fresh_process(_walk_state, tmp_path / str(n), n) for n in (10_000, 30_000)}
    # 20,000 objects more: a key (8 bytes) and a mark (1) each, and a byte a row of their pack's edges file walked;
    # with the rows held (52 bytes each) it was ~62 bytes an object (b76ca7cd^: 62.1 here, 62.1 from 10,000 to
    # 50,000; now 10.0 at both)
    per_object = (held[30_000] - held[10_000]) / 20_000
    assert per_object < 16, f"{per_object:.1f} bytes an object more, held {held}"
