"""gc's walk is bounded by its constants, not by the store: a reached object is a byte at its index row and one that
waits for its pack is 8 bytes, so a store five times larger peaks about the same; marks survive the index changing
under the walk (a merge of the tables it numbered), and a ref set after the plan still keeps its closure (gc's last
mark, whose doomed objects are tested again only when it marked any)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store, reach
from clawstore.store.core import ids, index
from clawstore.store.reach import Reach
from clawstore.store.services.gc import collect
from tests.gc.test_reach_many import _graph, _reference_walk
from tests.store.test_fsck_memory import _campaign
from tests.support.fresh import measured_in_fresh_process
from tests.support.storefiles import age_packs


def _shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    """The constants made small, so that these stores outgrow them as a big store does (in the test, and in the
    interpreter that measures it)."""
    monkeypatch.setattr(index, "SMALL_ROWS", 64)  # each commit's segment a table with rows, as at scale
    monkeypatch.setattr(reach, "HELD", 16 << 10)  # index rows held for look-ups (64 MiB at scale): the rest in place
    monkeypatch.setattr(ids, "FILE_CHUNK", 64 << 10)  # pack bytes hashed at once (an edges file is checked by it)


def peaks_alone(root: str) -> list[tuple[int, int]]:
    """(peak bytes traced, objects reached) of a gc --dry-run, then of a gc, of the store at `root`, each the lower of
    two. Called in a new interpreter (measured_in_fresh_process): in a test worker, what earlier tests left (their
    threads, their garbage's finalizers) would be counted too."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _shrink(monkeypatch)
        store = Store(Path(root), create=False)
        try:
            return [min(_peak(store, dry_run) for _ in range(2)) for dry_run in (True, False)]
        finally:
            store.close()


def _peak(store: Store, dry_run: bool) -> tuple[int, int]:
    """(peak bytes traced, objects reached) of one gc that finds nothing to do (its packs younger than the grace
    period), the index loaded before (every command's)."""
    store.runtime.index.reload()
    for table in store.runtime.index.snapshot().entries.tables:
        table._objects or table._lookup(False)  # (its fan-out and tags: 6 to 10 bytes a row, built on a first look-up)
    tracemalloc.start()
    try:
        report = collect(store, dry_run=dry_run)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.objects == [] and not report.dangling and report.packs_rewritten == 0
    return peak, report.reachable


@pytest.mark.timeout(120)
def test_a_store_five_times_larger_peaks_about_the_same_in_gc_and_its_dry_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _shrink(monkeypatch)
    peaks: dict[bool, dict[int, int]] = {True: {}, False: {}}
    for runs in (600, 3000):
        store, _, _ = _campaign(tmp_path / str(runs), runs)
        for dry_run, (peak, reached) in zip((True, False), measured_in_fresh_process(peaks_alone, store.root),
                                        strict=True):
            peaks[dry_run][runs] = peak
            assert reached == sum(1 for _ in store.iter_objects())  # (every object: the head reaches them all)
    # 12,000 more objects, 6,000 of them named from the head's pack (its parts name each run's key and record). Held as
    # a digest in a set each (~100 bytes) and those waiting for their packs as tuples (~170), they added 1.8 MB; a byte
    # a row and 8 bytes a waiting object add little: what is left (~750 KB) is the head's pack's edges file, loaded
    # once (32 bytes an id it names and its decoding), and the edges files' and marks' bytes a row. A gc with nothing
    # to delete does not hold its plan either (the kept objects, ~180 bytes each: 2 MB more).
    for dry_run, peak in peaks.items():
        assert peak[3000] < peak[600] + (1100 << 10), (dry_run, peaks)


def test_marks_made_before_the_index_merged_its_tables_still_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk marks objects by their rows in the tables it looked them up in; a merge (another process's commit
    compacting the index) replaces those tables before the next mark: the objects already marked stay reached (carried
    over by digest), the next walk stops at them, and gc keeps both closures."""
    monkeypatch.setattr(index, "SMALL_ROWS", 4)
    store = Store(tmp_path / "store")
    first = _graph(store, 300, seed=3)
    store.runtime.close_writer()
    walk = Reach(store, cached=True)
    walk.mark([first])
    before = {name for name, _, _ in walk._finder.tables()} if walk._finder is not None else set()
    assert before and len(walk) == len(_reference_walk(store, [first])[0])
    monkeypatch.setattr(index, "COMPACT_AT", 2)
    second = _graph(store, 300, seed=4)  # (its commits merge the tables the first walk numbered)
    store.runtime.close_writer()
    store.runtime.index.maybe_compact()
    store.runtime.index.reload()
    walk.mark([second])
    after = {name for name, _, _ in walk._finder.tables()} if walk._finder is not None else set()
    assert before - after, "no table the first walk numbered was merged away"
    expected = _reference_walk(store, [first, second])[0]
    assert walk.marked == expected and len(walk) == len(expected)
    assert all(walk.reached(bytes.fromhex(hexdigest)) for hexdigest in expected)

    store.set_ref("pins/first", first)
    store.set_ref("pins/second", second)
    age_packs(store, 7200)
    report = collect(store, grace_s=0)
    assert report.objects and not {oid[len("blake3:"):] for oid, _ in report.objects} & expected
    assert report.reachable == len(expected) and all(store.has("blake3:" + hexdigest) for hexdigest in expected)


def test_a_ref_set_after_the_plan_keeps_its_closure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ref set once the plan is made (under the sweep lock: only this process can) is taken by gc's last mark, and
    the objects it reaches come out of the doomed ones: nothing it names is deleted, the rest of the garbage is."""
    from clawstore.store.services import gc

    store = Store(tmp_path / "store")
    kept = store.put_json({"kept": True})
    late = store.put_json({"late": store.put_bytes(b"named by the late ref")})
    garbage = store.put_bytes(b"nothing names this")
    store.set_ref("pins/kept", kept)
    store.runtime.close_writer()
    age_packs(store, 7200)
    real_plan = gc._plan

    def plan_then_ref(*args: object, **kwargs: object) -> gc._Plan:
        made = real_plan(*args, **kwargs)  # type: ignore[arg-type]
        store.set_ref("pins/late", late)
        return made

    monkeypatch.setattr(gc, "_plan", plan_then_ref)
    report = collect(store, grace_s=0)
    assert [oid for oid, _ in report.objects] == [garbage]
    fresh = Store(store.root, create=False)
    assert fresh.get_json(late) and not fresh.has(garbage)
    assert all(fresh.has(oid) for oid in (kept, *fresh.get_json(late).values()))
