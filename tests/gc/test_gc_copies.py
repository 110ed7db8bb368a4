"""A killed gc's copies (store/services/gc_copies.py): the next gc drops them whatever their age, but not while a build
runs, never a pack the index names, and a damaged list names nothing."""

from __future__ import annotations

from pathlib import Path

from clawstore.store.core.packfile import iter_pack_ids
from clawstore.store.services.gc import collect
from clawstore.store.services.gc_copies import COPIES_FILE, listed_copies
from tests.gc.helpers import killed_gc, store_with_garbage


def test_copies_are_kept_while_a_build_runs_and_dropped_after(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = store_with_garbage(root)
    copies = killed_gc(root)
    assert len(copies) > 1 and listed_copies(root / "locks", root / "packs") == copies
    with store.lease("build b1"):  # a running build: what is younger than its window stays
        collect(store)
    assert copies <= set(iter_pack_ids(root / "packs"))
    assert listed_copies(root / "locks", root / "packs") == copies  # still listed for the next gc
    report = collect(store)
    assert not copies & set(iter_pack_ids(root / "packs")) and report.packs_deleted >= len(copies)
    assert not (root / "locks" / COPIES_FILE).exists()
    assert len(list(store.iter_objects())) == 301 and collect(store, grace_s=0).objects == []


def test_copies_the_index_names_are_kept(tmp_path: Path) -> None:
    """Killed after publishing the index that names its copies: they are the store's now."""
    root = tmp_path / "store"
    store = store_with_garbage(root)
    copies = killed_gc(root, "swapped")
    collect(store)
    assert copies <= set(iter_pack_ids(root / "packs"))
    assert len(list(store.iter_objects())) == 301


def test_a_damaged_list_names_nothing(tmp_path: Path) -> None:
    """A torn line, junk, and the id of a pack the index names (what a hand could write) drop nothing."""
    root = tmp_path / "store"
    store = store_with_garbage(root)
    collect(store, grace_s=0)
    packs = set(iter_pack_ids(root / "packs"))
    named = sorted(packs)[0]
    junk = b"\xff\x00junk\n../../etc\n" + named.encode() + b"\n" + named[:20].encode()
    (root / "locks" / COPIES_FILE).write_bytes(junk)
    assert listed_copies(root / "locks", root / "packs") == {named}
    collect(store)  # (that pack is young, as a killed gc's copy would be)
    assert set(iter_pack_ids(root / "packs")) == packs
    assert len(list(store.iter_objects())) == 301
