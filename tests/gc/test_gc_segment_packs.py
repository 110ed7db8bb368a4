"""The index segment a deleting gc writes names only packs that are there: the packs of the entries it kept were
rewritten and deleted, and their names must not stay in its table of packs (the kept entries' rows re-slotted)."""

from __future__ import annotations

from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.index import list_segments, open_table
from clawstore.store.core.packfile import iter_pack_ids
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from tests.support.storefiles import age_packs


def _store_with_kept_entries_in_sparse_packs(root: Path) -> tuple[Store, dict[str, str]]:
    """Three packs, two hours old, each half garbage and holding two action entries whose records a pin names."""
    store = Store(root)
    live, entries = [], {}
    for n in range(3):
        with store.batch():
            live += [store.put_bytes(b"live %d %d " % (n, i) * 50) for i in range(100)]
            for i in range(100):
                store.put_bytes(b"garbage %d %d " % (n, i) * 50)
            for i in range(2):
                key = store.put_bytes(b"key %d %d" % (n, i))
                entries[key] = store.put_action(key, {"kind": "run", "key": key, "outputs": {}})
        store.runtime.close_writer()
    store.set_ref("pins/live", store.put_json({"nodes": live, "records": sorted(entries.values())}))
    store.runtime.close_writer()
    age_packs(store, 7200)
    return store, entries


def test_a_gc_that_moves_kept_entries_names_no_pack_it_deleted(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store, entries = _store_with_kept_entries_in_sparse_packs(root)
    before = set(iter_pack_ids(root / "packs"))
    report = collect(store, grace_s=0)
    assert report.packs_rewritten == len(before) and report.actions_deleted == 0
    there = set(iter_pack_ids(root / "packs"))
    assert not before & there  # (every old pack rewritten: the entries now live in the new one)
    named = {pack for name in list_segments(root / "index") for pack in open_table(root / "index", name).packs}
    assert named <= there, f"the index names deleted packs {sorted(named - there)}"
    store = Store(root, create=False)
    assert {key: store.get_action_record_id(key) for key in entries} == entries
    assert fsck(store).clean
