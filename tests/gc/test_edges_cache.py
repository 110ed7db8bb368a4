"""The edges cache (store/edges.py) against what would make it lie: a damaged, truncated, foreign or stale file, and
an object damaged after its pack's file was written. gc and fsck must find what they find without it."""

from __future__ import annotations

import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.errors import CorruptObjectError
from clawstore.store import Store, edges
from clawstore.store.core import index
from clawstore.store.core.packfile import iter_pack_ids, pack_path
from clawstore.store.reach import Reach
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from tests.gc.helpers import pinned_graph, store_once
from tests.gc.test_reach_many import _graph, _reference_walk
from tests.support.storefiles import age_packs, flip_in_frame

Built = tuple[Path, str]  # (a built store's root, and the root object of its graph)


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A store of a 1,500-object graph over several packs, pinned, each sealed pack's file written by its first fsck:
    made once in the run (~1 s of CPU; tests/gc/helpers.py pinned_graph, test_reach_many.py's too), each test given a
    copy (_cached_store)."""
    return pinned_graph(tmp_path_factory)


def _cached_store(cached: Built, tmp_path: Path) -> tuple[Store, str]:
    """A copy of the `cached` store (its files' mtimes kept)."""
    built, root = cached
    return Store(Path(shutil.copytree(built, tmp_path / "store")), create=False), root


@pytest.fixture(scope="module")
def in_tables(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A 1,600-object graph's store (4 packs and the root's) whose ids wait for their packs, as in a big store's
    tables (SMALL_ROWS 16): made once in the run, each test given a copy."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(index, "SMALL_ROWS", 16)
        return store_once(tmp_path_factory, "edges-cache-tables", lambda store: _graph(store, 1600, seed=5))


def _files(store: Store) -> list[Path]:
    return sorted((store.root / edges.DIR).glob(f"*{edges.SUFFIX}"))


def _loaded(store: Store) -> dict[str, bool]:
    return {pack: edges.load(store.root, store.runtime.packs_dir, pack) is not None
            for pack in iter_pack_ids(store.runtime.packs_dir)}


def test_fsck_writes_one_file_a_sealed_pack_and_gc_walks_them_to_the_same_closure(
        cached: Built, tmp_path: Path) -> None:
    store, root = _cached_store(cached, tmp_path)
    assert len(_files(store)) == len(list(iter_pack_ids(store.runtime.packs_dir))) >= 3
    assert all(_loaded(store).values())
    walk = Reach(store, cached=True)
    walk.mark([root])
    reached, missing = _reference_walk(store, [root])
    assert walk.marked == reached and set(walk.missing) == missing
    before = [path.read_bytes() for path in _files(store)]
    assert fsck(store).clean  # the second fsck trusts them and writes nothing new
    assert [path.read_bytes() for path in _files(store)] == before


def _flip_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40])


def _foreign(path: Path) -> None:
    """Another pack's file under this pack's name: whole, but not about this pack."""
    others = [p for p in path.parent.iterdir() if p != path]
    path.write_bytes(others[0].read_bytes())


@pytest.mark.parametrize("damage", [_flip_middle, _truncate, _foreign, lambda p: p.write_bytes(b"")])
def test_a_damaged_truncated_or_foreign_file_is_never_trusted_and_fsck_rewrites_it(
        cached: Built, tmp_path: Path, damage: Callable[[Path], None]) -> None:
    store, root = _cached_store(cached, tmp_path)
    victim = _files(store)[0]
    good = victim.read_bytes()
    damage(victim)
    assert not _loaded(store)[victim.name.removesuffix(edges.SUFFIX)]
    walk = Reach(store, cached=True)
    walk.mark([root])
    assert walk.marked == _reference_walk(store, [root])[0]
    assert fsck(store).clean
    assert victim.read_bytes() == good  # rebuilt from the pack, read again


def test_an_object_damaged_after_its_pack_was_cached_is_found_by_fsck_and_stops_gc(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    leaves = [store.put_bytes(f"leaf {i}".encode()) for i in range(200)]
    victim = store.put_json({"names": leaves, "pad": "z" * 3000})
    store.set_ref("pins/v", store.put_json({"v": victim}))
    store.runtime.close_writer()
    assert fsck(store).clean and _files(store)
    flip_in_frame(store, victim, 30)
    report = fsck(store)
    assert list(report.corrupt) == [victim]  # the pack no longer hashes to what its file records: read again
    age_packs(store, 7200)
    with pytest.raises(CorruptObjectError, match=re.escape(victim)):
        collect(store, grace_s=0)
    assert all(store.has(leaf) for leaf in leaves)


def test_gc_drops_the_files_of_the_packs_it_removes_and_fsck_those_of_packs_gone(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    kept = store.put_json({"k": [store.put_bytes(b"kept")]})
    store.set_ref("pins/k", kept)
    store.runtime.close_writer()
    garbage = [store.put_bytes(os.urandom(2000)) for _ in range(50)]
    store.runtime.close_writer()
    assert fsck(store).clean and len(_files(store)) == 2
    age_packs(store, 7200)
    report = collect(store, grace_s=0)
    assert sorted(oid for oid, _ in report.objects) == sorted(garbage)
    packs = set(iter_pack_ids(store.runtime.packs_dir))
    assert {path.name.removesuffix(edges.SUFFIX) for path in _files(store)} <= packs
    stray = store.root / edges.DIR / f"{'0' * 32}{edges.SUFFIX}"
    stray.write_bytes(b"a pack long gone")
    assert fsck(store).clean and not stray.exists()


def test_the_walk_comes_back_to_a_pack_it_left_and_finds_the_whole_closure(tmp_path: Path) -> None:
    """One pack's file is held at a time: c (pack X) names b (pack Y), which names a (pack X again)."""
    scratch = Store(tmp_path / "scratch")  # the same content has the same id: b's id, before b is in the store
    a_doc = {"leaf": "a", "pad": "x" * 100}
    b_doc = {"names": scratch.put_json(a_doc)}
    store = Store(tmp_path / "store")
    a = store.put_json(a_doc)
    c = store.put_json({"names": scratch.put_json(b_doc)})
    store.runtime.close_writer()
    b = store.put_json(b_doc)
    store.runtime.close_writer()
    store.set_ref("pins/c", c)
    assert fsck(store).clean and len(_files(store)) == 2
    walk = Reach(store, cached=True)
    walk.mark([c])
    assert walk.marked == {oid.removeprefix("blake3:") for oid in (a, b, c)} and not walk.missing
    assert walk.loads == 3  # X, Y, then X again


def test_the_walk_takes_up_the_newest_pack_first_and_meets_each_pack_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sealed in turn, A (x1, x2), B (y names x2), E (root names y and e, e names x1), in the index's tables: the walk
    takes up B first (the newer), then A (x1 and x2 at once). Taken as they came, A went first (x1, the last met) and
    was loaded again for x2 once B was walked."""
    monkeypatch.setattr(index, "SMALL_ROWS", 16)  # (each commit's segment merged into tables: ids wait for their pack)
    store = Store(tmp_path / "store")

    def sealed(tag: str) -> None:
        for i in range(20):
            store.put_json({tag: i})
        store.runtime.close_writer()

    x1, x2 = store.put_json({"x": 1, "pad": "x" * 100}), store.put_json({"x": 2, "pad": "x" * 100})
    sealed("a")
    y = store.put_json({"y": x2})
    sealed("b")
    e = store.put_json({"e": x1})
    root = store.put_json({"root": [y, e]})
    sealed("e")
    order = [store.locate(oid)[0] for oid in (x1, y, root)]
    assert len(set(order)) == 3 == len(list(iter_pack_ids(store.runtime.packs_dir)))
    assert store.runtime.index.snapshot().entries.tables
    for age, pack in enumerate(order):  # (a second apart, oldest first: packs sealed in one clock tick are not told)
        os.utime(pack_path(store.runtime.packs_dir, pack), (1e9 + age, 1e9 + age))
    walk = Reach(store, cached=True)
    walk.mark([root])
    assert walk.marked == {oid.removeprefix("blake3:") for oid in (x1, x2, y, e, root)} and not walk.missing
    assert walk.loads == 3  # E, B, A: each once


def test_a_walk_after_the_index_changed_looks_up_the_new_segments_and_reaches_what_they_name(
        cached: Built, tmp_path: Path) -> None:
    """The cached walk looks up objects in index rows it holds (reach.HELD): a later mark, after another writer sealed
    a pack and added its segment, must see them, and an object written after the rows were read is still found (the
    long way) rather than called missing."""
    store, root = _cached_store(cached, tmp_path)
    walk = Reach(store, cached=True)
    walk.mark([root])
    ghosts = dict(walk.missing)  # (ids the graph names that were never stored)
    other = Store(store.root, create=False)  # (another process's writer: its own pack and segment)
    fresh = [other.put_json({"fresh": i, "old": root}) for i in range(50)]
    late = other.put_json({"late": fresh})
    other.runtime.close_writer()
    assert walk.mark([late]) == 51
    assert walk.missing == ghosts and all(oid[len("blake3:"):] in walk for oid in [late, *fresh])
    unsealed = other.put_json({"unsealed": fresh[0]})  # (in a pack still open: no edges file, read the long way)
    assert walk.mark([unsealed]) == 1 and walk.missing == ghosts
    assert walk.marked == _reference_walk(store, [root, late, unsealed])[0]


@pytest.mark.parametrize("order", ["newest", "oldest", "shuffled"])
def test_the_cached_walk_marks_the_whole_closure_whatever_order_it_takes_the_packs_up_in(
        in_tables: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str) -> None:
    """The take-up order (`Reach._sealed_at`, newest first) only saves loads: oldest first the walk must come back to
    packs, and in any order it marks what the plainest walk reaches, in one mark or two."""
    monkeypatch.setattr(index, "SMALL_ROWS", 16)  # (the ids wait for their packs, as in a big store's tables)
    store = Store(Path(shutil.copytree(in_tables[0], tmp_path / "store")), create=False)
    root = in_tables[1]
    sealed_at, shuffled = Reach._sealed_at, random.Random(3)
    keys: dict[str, Callable[[Reach, str], tuple[float, str]]] = {
        "newest": sealed_at,  # (the mtimes below: by name)
        "oldest": lambda walk, pack: (-sealed_at(walk, pack)[0], pack),  # (here 8 loads for 4 packs in one mark)
        "shuffled": lambda walk, pack: (shuffled.random(), pack),
    }
    monkeypatch.setattr(Reach, "_sealed_at", keys[order])
    for age, pack in enumerate(sorted(iter_pack_ids(store.runtime.packs_dir))):  # (distinct mtimes, in name order)
        os.utime(pack_path(store.runtime.packs_dir, pack), (1e9 + age, 1e9 + age))
    reached, missing = _reference_walk(store, [root])
    named = store.get_json(root)["all"]
    for roots in ([[root]], [named[:30], [root]]):
        walk = Reach(store, cached=True)
        for some in roots:
            walk.mark(some)
        assert walk.marked == reached and set(walk.missing) == missing
        assert walk.loads >= len(list(iter_pack_ids(store.runtime.packs_dir)))  # (by the packs' files, not read)
