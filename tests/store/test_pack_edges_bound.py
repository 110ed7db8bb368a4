"""A pack is sealed once its objects name EDGES_TARGET ids, as soon as a write passes it (store/core/runtime.py): its
edge log (32 bytes an id named) and its seal's edges file (as much again) stay bounded however many ids one batch
names. A build's last batch, the campaign head's parts, names every node's record and outputs (~560,000 ids at
10,000 x 5): its pack's seal was the cold build's highest memory, and grew with the campaign (docs/building.md,
Memory: session 50)."""

from __future__ import annotations

import gc
import random
import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core import runtime
from clawstore.store.core.edgefile import HEAD, children_in
from clawstore.store.services.fsck import fsck
from tests.support.fresh import measured_in_fresh_process
from tests.support.storefiles import pack_files

TARGET = 1 << 13  # ids, in these tests (8,192: 256 KiB of edge log)
# 50 ids an object go through a batch's queue (objects.QUEUED_CHILDREN_MAX: 64); 100 are appended at once.
PATHS = pytest.mark.parametrize("named", [50, 100], ids=["queued", "appended"])


def _objects(count: int, named: int, seed: int) -> list[dict[str, list[str]]]:
    """Objects shaped as a head's parts are for the edges: each naming `named` ids stored elsewhere."""
    rng = random.Random(seed)
    return [{"nodes": [f"blake3:{rng.randbytes(32).hex()}" for _ in range(named)]} for _ in range(count)]


def _put_in_one_batch(root: Path, objects: list[dict[str, list[str]]], traced: bool = True) -> tuple[list[str], int]:
    """The objects put in one batch and the store closed (its last pack sealed); the highest Python memory meanwhile
    over that before (0 unless `traced`: tracing slows the puts)."""
    store = Store(root)
    if not traced:
        with store.batch():
            ids = [store.put_json(value) for value in objects]
        store.close()
        return ids, 0
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        with store.batch():
            ids = [store.put_json(value) for value in objects]
        store.close()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return ids, peak - start


@PATHS
def test_one_batch_naming_many_ids_seals_its_packs_at_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                named: int) -> None:
    monkeypatch.setattr(runtime, "EDGES_TARGET", TARGET)
    objects = _objects(6 * TARGET // named, named, 1)  # 6 times the bound, one batch
    ids, _ = _put_in_one_batch(tmp_path / "store", objects, traced=False)
    edges = sorted((tmp_path / "store" / "edges").glob("*.edges"))
    assert len(pack_files(Store(tmp_path / "store"))) == len(edges) >= 4
    for path in edges:  # each pack's edges file: what its objects name, at most the bound and one write past it
        named_in_file = HEAD.unpack_from(path.read_bytes())[6]
        assert 0 < named_in_file < TARGET + 256 * named, (path.name, named_in_file)
    fresh = Store(tmp_path / "store")  # the batch durable and indexed, whichever pack each object went to
    assert [fresh.get_json(oid) for oid in ids] == objects
    assert [len(children_in(fresh.get_bytes(oid))) for oid in ids[:3]] == [named] * 3
    assert fsck(fresh).clean


def batch_peaks_alone(root: str, count: str) -> tuple[int, int]:
    """What a batch of objects naming 20,000 ids in all, then one naming 80,000, held at their peaks (`count` ids an
    object), after a first small batch. Called in a new interpreter (measured_in_fresh_process): in a test worker,
    what earlier tests left (their threads, their garbage's finalizers) would be counted too."""
    runtime.EDGES_TARGET = TARGET
    named, where = int(count), Path(root)
    _put_in_one_batch(where / "warm", _objects(10, named, 2))  # imports and caches of a first batch
    small = _put_in_one_batch(where / "small", _objects(20_000 // named, named, 3))[1]
    return small, _put_in_one_batch(where / "large", _objects(80_000 // named, named, 4))[1]  # 4 times the ids


@PATHS
def test_what_a_batch_naming_many_ids_holds_is_bounded(tmp_path: Path, named: int) -> None:
    small, large = measured_in_fresh_process(batch_peaks_alone, tmp_path, named)
    # Before (one pack, sealed at the end): ~120 bytes more a named id at the seal's peak (its log, the edges file's
    # other ids, their tokens and dict); now the packs' seals hold the bound, and the batch 32 bytes of index an object.
    assert large - small < 60_000 * 20, f"{(large - small) / 60_000:.0f} bytes more a named id"
