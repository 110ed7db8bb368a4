"""gc's copy seals a pack once it holds gc.COPY_PACK_BLOBS blobs, not only at a build's limits: the kept action entries
of the rewritten packs (they name nothing, a few bytes each) otherwise all went into its last pack, whose seal looked
up every row at once. Each pack it writes holds at most that many, every kept object and entry reads back, and the
report's bytes_freed is what the packs' files took less what they take now."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core.packfile import is_sealed, sealed_table
from clawstore.store.services import gc
from tests.gc.test_gc_plan_memory import _store_of
from tests.support.storefiles import pack_files

KEPT = 2000
BLOBS = 300
_TABLE_ROW = 49  # (packfile._TABLE_ROW: a blob's row in a sealed pack's table)


def _sizes(store: Store) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in pack_files(store)}


def test_the_copy_seals_a_pack_at_copy_pack_blobs_and_says_the_bytes_it_freed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store_of(tmp_path / "store", KEPT)  # (KEPT objects and entries kept, a fifth more of each doomed)
    before = _sizes(store)
    monkeypatch.setattr(gc, "COPY_PACK_BLOBS", BLOBS)
    report = gc.collect(Store(store.root, create=False), max_unused=0.0, listed=False)  # (its packs rewritten)
    assert (report.objects_deleted, report.actions_deleted) == (KEPT // 5 + 1, KEPT // 5) and report.packs_rewritten
    after = _sizes(store)
    made = [path for path in pack_files(store) if path.name not in before]
    blobs = [len(sealed_table(path)) // _TABLE_ROW for path in made]
    assert all(is_sealed(path) for path in made)
    assert max(blobs) <= BLOBS and sum(blobs) >= 2 * KEPT  # (every kept object and entry copied, BLOBS a pack)
    assert report.pack_bytes_freed == sum(before.values()) - sum(after.values())
    fresh = Store(store.root, create=False)
    assert sum(1 for _ in fresh.iter_objects()) == KEPT + KEPT // 1000 + 2  # (the lists, the record, the pin)
    assert sum(1 for _ in fresh.iter_actions()) == KEPT
    for oid in fresh.iter_objects():  # (each read back, verified)
        fresh.get_bytes(oid)
