"""Reachability over many objects and packs, and fsck verifying a pack a region at a time (zstd's batch decoder):
they must find exactly what the plainest reading finds, and a damaged or lost object among many must stop gc (never
guess what it named) and be named by fsck, alone."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from pathlib import Path

import pytest

from clawstore.errors import CorruptObjectError, MissingObjectError
from clawstore.store import Store
from clawstore.store.core.ids import PREFIX
from clawstore.store.reach import Reach
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from tests.support.storefiles import age_packs, flip_in_frame, lose_object, pack_files

_ID = re.compile(r"blake3:[0-9a-f]{64}")


def _reference_walk(store: Store, roots: list[str]) -> tuple[set[str], set[str]]:
    """(reached, missing) hex digests, one verified object read at a time: the rule in its plainest form."""
    reached: set[str] = set()
    missing: set[str] = set()
    stack = list(roots)
    while stack:
        oid = stack.pop()
        hexdigest = oid[len(PREFIX):]
        if hexdigest in reached or hexdigest in missing:
            continue
        try:
            data = store.get_bytes(oid)
        except MissingObjectError:
            missing.add(hexdigest)
            continue
        reached.add(hexdigest)
        if data.lstrip()[:1] in (b"{", b"["):
            stack += _ID.findall(data.decode("utf-8", "replace"))
    return reached, missing


def _graph(store: Store, count: int, seed: int) -> str:
    """A random DAG of JSON objects over several packs, with what a batch decoder must leave to the one at a time
    path: an empty object, incompressible (raw) frames, an object over the batch limit; and text naming ids (names
    nothing), ids of objects never stored. Returns the root's id."""
    rnd = random.Random(seed)
    made = [store.put_bytes(b""), store.put_bytes(os.urandom(3000)),
            store.put_bytes(b"plain text naming " + store.put_bytes(b"only named by text").encode())]
    ghosts = [PREFIX + os.urandom(32).hex() for _ in range(5)]
    for index in range(count):
        named = rnd.sample(made, min(len(made), rnd.randint(0, 4)))
        if rnd.random() < 0.02:
            named.append(rnd.choice(ghosts))
        if index % 500 == 499:
            store.runtime.close_writer()  # the next objects go to another pack
        if index == count // 2:
            made.append(store.put_json({"big": os.urandom(1_200_000).hex()[:2_400_000], "n": named}))
            continue
        doc = {"i": index, "n": named} if rnd.random() < 0.9 else [" ", named, os.urandom(400).hex()]
        made.append(store.put_json(doc))
    root = store.put_json({"all": made[-60:], "ghost": ghosts[0]})
    store.runtime.close_writer()
    return root


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """tests/gc/helpers.py pinned_graph: _graph's store of 1,500 objects, made once in the run (test_edges_cache.py's
    too), each test given a copy (_pinned_copy)."""
    from tests.gc.helpers import pinned_graph

    return pinned_graph(tmp_path_factory)


def _pinned_copy(pinned: tuple[Path, str], tmp_path: Path) -> tuple[Store, str]:
    built, root = pinned
    return Store(Path(shutil.copytree(built, tmp_path / "store")), create=False), root


def test_the_walk_reaches_exactly_what_the_plainest_walk_reaches(pinned: tuple[Path, str], tmp_path: Path) -> None:
    store, root = _pinned_copy(pinned, tmp_path)
    assert len(pack_files(store)) >= 4
    walk = Reach(store)
    walk.mark([root])
    reached, missing = _reference_walk(store, [root])
    assert len(reached) > 100 and missing
    assert walk.marked == reached
    assert set(walk.missing) == missing
    assert walk.missing[sorted(missing)[0]] in reached  # who named it is said
    assert walk.mark([root]) == 0  # marking again finds nothing new


@pytest.mark.parametrize("damage", [("json", 40), ("json", -2), ("raw", 1000)])
def test_gc_stops_at_a_damaged_object_among_many_and_deletes_nothing(tmp_path: Path, damage: tuple[str, int]) -> None:
    """A reached object that does not verify could name anything: gc must fail, not sweep what it named."""
    store = Store(tmp_path / "store")
    with store.batch():  # (one commit, not 451 with their fsyncs)
        leaves = [store.put_bytes(f"leaf {i}".encode()) for i in range(300)]
        kind, position = damage
        victim = (store.put_json({"names": leaves[:150], "pad": "x" * 2000}) if kind == "json"
                  else store.put_bytes(b"[" + json.dumps(leaves[:150]).encode() + b","
                                       + os.urandom(4000).hex().encode() + b"]"))
        siblings = [store.put_json({"names": [leaf]}) for leaf in leaves[150:]]
    store.set_ref("pins/all", store.put_json({"parts": [victim, *siblings]}))
    store.runtime.close_writer()
    flip_in_frame(store, victim, position)
    age_packs(store, 7200)
    before = sorted(store.iter_objects())
    with pytest.raises(CorruptObjectError, match=re.escape(victim)):
        collect(store, grace_s=0)
    assert sorted(Store(store.root, create=False).iter_objects()) == before
    assert all(Store(store.root, create=False).get_bytes(leaf) for leaf in leaves)


def test_a_lost_object_is_dangling_named_by_its_parent_and_gc_keeps_the_rest(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    kept = [store.put_bytes(f"kept {i}".encode()) for i in range(50)]
    lost = store.put_bytes(b"will be lost")
    parent = store.put_json({"kept": kept, "lost": lost})
    store.set_ref("pins/p", parent)
    garbage = store.put_bytes(b"nothing names this")
    store.runtime.close_writer()
    lose_object(store, lost)
    age_packs(store, 7200)
    report = collect(store, grace_s=0)
    assert report.dangling == {lost: parent}
    assert [oid for oid, _ in report.objects] == [garbage]
    assert all(store.has(oid) for oid in (*kept, parent))


def test_fsck_names_each_damaged_object_among_many_in_one_pack_and_no_other(tmp_path: Path) -> None:
    """Verified a batch at a time: one frame that does not decode, or decodes to the wrong content, is named
    alone; its neighbours in the same batch are fine."""
    store = Store(tmp_path / "store")
    with store.batch():  # (one commit, not 2,021 with their fsyncs: what is verified is the pack)
        objects = [store.put_json({"n": i, "pad": "y" * (i % 700)}) for i in range(2000)]
        raw = [store.put_bytes(os.urandom(5000)) for _ in range(20)]
    store.set_ref("pins/all", store.put_json({"all": [*objects, *raw]}))
    store.runtime.close_writer()
    assert len(pack_files(store)) == 1
    undecodable, wrong = objects[777], raw[7]
    flip_in_frame(store, undecodable, 5)  # the frame header: it no longer decodes
    flip_in_frame(store, wrong, 2000)  # a raw block's content: decodes, to bytes that do not hash to its id
    report = fsck(store)
    assert sorted(report.corrupt) == sorted([undecodable, wrong])
    assert "undecodable" in report.corrupt[undecodable] and "does not match" in report.corrupt[wrong]
    assert report.bad_packs and report.objects == 2021


def test_a_dry_runs_plan_counts_each_packs_live_bytes_as_the_held_plan_does(
        pinned: tuple[Path, str], tmp_path: Path) -> None:
    """A dry run streams the kept objects and entries into each pack's live bytes without holding them: the packs it
    would rewrite or delete, and the bytes it would free, are those of the plan a gc holds to rewrite from."""
    from clawstore.store.services import gc

    store, root = _pinned_copy(pinned, tmp_path)  # (pinned at pins/root)
    for start in range(0, 300, 100):  # garbage in every pack but the last: some rewritten, some deleted
        with store.batch():  # (a commit a pack, not one an object)
            for index in range(start, start + 100):
                store.put_json({"garbage": index, "pad": os.urandom(300).hex()})
        store.runtime.close_writer()
    for index in range(3):  # an entry no ref reaches (deleted), and its record with it
        key = store.put_json({"node": index})
        store.put_action(key, {"kind": "run", "key": key, "input": key, "outputs": {}})
    store.runtime.close_writer()
    age_packs(store, 7200)
    plans = []
    for held in (True, False):
        reach = Reach(store, cached=True)
        reach.mark([root])
        report = gc.GcReport(dry_run=not held, grace_s=0)
        policy = gc._policy(time.time(), 0, [])
        plan = gc._plan(store, reach, policy, keep_all=False, max_unused=0.1, report=report, held=held)
        plans.append((plan.rewrite, plan.delete, report.pack_bytes_freed, report.objects, report.actions,
                      [key for key, _ in plan.doomed_actions.sorted_items()]))
        assert bool(plan.objects) == held and len(plan.objects) in (0, len(reach))
    assert plans[0] == plans[1]
    assert plans[0][0] and plans[0][3] and plans[0][4]  # something to rewrite, objects and an entry to delete
