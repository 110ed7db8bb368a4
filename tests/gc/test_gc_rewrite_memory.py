"""A gc's copy is bounded by the pack limits, not by the objects it copies: with the limits shrunk, a store five times
larger copies with about the same memory above the plan's (the plan itself, the kept objects and entries, still grows:
docs/gc-and-archives.md, Scale: memory)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core import runtime
from clawstore.store.core.packfile import iter_pack_ids
from clawstore.store.services import gc, gc_kept
from tests.store.test_fsck_memory import _campaign
from tests.support.fresh import measured_in_fresh_process
from tests.support.storefiles import age_packs


def _copy_peak(store: Store, monkeypatch: pytest.MonkeyPatch) -> tuple[int, gc.GcReport]:
    """(peak bytes traced from the rewrite's start to its index segment, above what was traced at its start; the
    report) of a gc that merges every pack of `store` (each a small one) into new ones."""
    seen: dict[str, int] = {}
    real_rewrite, real_write_segment = gc._rewrite, gc.write_rows_segment

    def rewrite(*args: object) -> None:
        seen["start"] = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        real_rewrite(*args)  # type: ignore[arg-type]

    def write_segment(*args: object) -> None:
        seen["copy"] = tracemalloc.get_traced_memory()[1] - seen["start"]
        real_write_segment(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gc, "_rewrite", rewrite)
    monkeypatch.setattr(gc, "write_rows_segment", write_segment)
    age_packs(store, 7200)
    tracemalloc.start()
    try:
        report = gc.collect(store, grace_s=0)
    finally:
        tracemalloc.stop()
    return seen["copy"], report


def copy_peak_alone(root: str, runs: str) -> int:
    """_copy_peak of a store of `runs` runs made at `root`, the pack limits shrunk, and what the copy left checked.
    Called in a new interpreter (measured_in_fresh_process): in a test worker, what earlier tests left (their threads,
    their garbage's finalizers) would be counted too."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(runtime, "PACK_TARGET", 64 << 10)  # 32 MiB at scale
        monkeypatch.setattr(runtime, "EDGES_TARGET", 1 << 10)  # 131,072 ids at scale
        monkeypatch.setattr(gc_kept, "COPY_ROWS", 512)  # 65,536 at scale: the moved rows taken in pack order at once
        monkeypatch.setattr(gc_kept, "SPILL_ROWS", 128)  # 16,384 at scale
        store, _, artifacts = _campaign(Path(root), int(runs))
        objects = sum(1 for _ in store.iter_objects())
        old_packs = set(iter_pack_ids(store.runtime.packs_dir))
        peak, report = _copy_peak(store, monkeypatch)
        assert report.packs_rewritten == len(old_packs) and not report.objects and not report.corrupt
        fresh = Store(store.root, create=False)
        new_packs = set(iter_pack_ids(fresh.runtime.packs_dir))
        assert not new_packs & old_packs and len(new_packs) > 1  # (every object copied, into several packs)
        assert sum(1 for _ in fresh.iter_objects()) == objects
        assert all(fresh.get_bytes(oid) for oid in artifacts[::97])
        return peak


@pytest.mark.timeout(180)
def test_a_store_five_times_larger_copies_with_about_the_same_memory(tmp_path: Path) -> None:
    peaks = {runs: measured_in_fresh_process(copy_peak_alone, tmp_path / str(runs), runs) for runs in (600, 3000)}
    # 9,600 objects more copied (and 2,400 entries). The copy into one pack held its table row (49 bytes) and edges
    # (44 bytes and 32 an id named) for each, and a copy of the plan's tables and a sorted list of their items (~150
    # bytes an object): ~2.5 MB more. Now the ids to copy, sorted (16 bytes each while sorting), and one pack's state.
    assert peaks[3000] < peaks[600] + (400 << 10), peaks
