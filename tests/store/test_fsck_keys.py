"""fsck's look-ups of an index past fsck_keys.ROWS_HELD: its tables' keys held (8 bytes an object), not their rows (52),
measured in a fresh interpreter; and they answer what the index's own look-up answers, alone and in bulk."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core import index
from clawstore.store.services import fsck_keys
from clawstore.store.services.fsck import fsck
from clawstore.store.services.fsck_keys import IndexKeys
from tests.store.test_fsck_memory import _campaign
from tests.support.fresh import measured_in_fresh_process
from tests.support.storefiles import lose_object


def held_by_look_ups(root: str, runs: str, rows_held: str) -> list[int]:
    """(objects, bytes tracemalloc counts held by fsck's look-ups of a store of `runs` runs) with ROWS_HELD as given."""
    index.SMALL_ROWS = 64  # (each batch's segment a table, read in place or held)
    fsck_keys.ROWS_HELD = int(rows_held)
    store = _campaign(Path(root) / f"{runs}-{rows_held}", int(runs))[0]
    store.runtime.index.reload()
    entries = store.runtime.index.snapshot().entries
    for table in entries.tables:  # (the tables' own fan-outs and tags, kept on them either way, made first)
        table._lookup(False)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    keys = IndexKeys(entries)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert keys.by_keys == (int(rows_held) == 0)
    return [index.object_rows_size(entries) // 52, held]


def test_past_rows_held_the_look_ups_hold_8_bytes_an_object(tmp_path: Path) -> None:
    """From 600 to 1,200 runs (~2,400 more objects in tables): the keys grow by 8 bytes an object and a little; the
    rows held as before grow by their 52 (so the measure can tell the two apart: 7.4 and 51.8 bytes an object here,
    as from 600 to 2,400 runs)."""
    growth = {}
    for rows_held in (0, 64 << 20):
        small_objects, small = measured_in_fresh_process(held_by_look_ups, tmp_path, 600, rows_held)
        large_objects, large = measured_in_fresh_process(held_by_look_ups, tmp_path, 1200, rows_held)
        growth[rows_held] = (large - small) / (large_objects - small_objects)
    assert growth[0] < 16, growth
    assert growth[64 << 20] > 40, growth


def test_the_keys_answer_as_the_index_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "SMALL_ROWS", 64)  # (each batch's segment a table)
    store = _campaign(tmp_path / "store", 300)[0]
    store.runtime.index.reload()
    entries = store.runtime.index.snapshot().entries
    assert len(entries.tables) > 1
    wanted = list(store.runtime.index.objects)  # (digests)
    wanted += [os.urandom(32) for _ in range(50)] + [wanted[0][:8] + os.urandom(24)]  # (absent; a key shared)
    rows = IndexKeys(entries)
    monkeypatch.setattr(fsck_keys, "ROWS_HELD", 0)
    keys = IndexKeys(entries)
    assert keys.by_keys and not rows.by_keys
    expected = [entries.find_object(digest) for digest in wanted]
    assert sum(loc is not None for loc in expected) == len(wanted) - 51
    assert keys.find_many(wanted) == expected
    assert rows.find_many(wanted) == expected
    assert [keys.find(digest) for digest in wanted] == expected


def test_fsck_by_keys_finds_what_fsck_by_rows_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "SMALL_ROWS", 64)
    store, keys, artifacts = _campaign(tmp_path / "store", 300)
    assert fsck(store).problems == []  # (the packs' edges files written: the look-ups of their ids then in bulk)
    lose_object(store, artifacts[150])  # an output lost
    lose_object(store, keys[7])  # an input document lost
    by_rows = fsck(Store(store.root, create=False)).problems
    monkeypatch.setattr(fsck_keys, "ROWS_HELD", 0)
    by_keys = fsck(Store(store.root, create=False)).problems
    assert len(by_rows) >= 2 and by_keys == by_rows
