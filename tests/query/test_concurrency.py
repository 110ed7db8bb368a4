"""Several processes index builds into one manifest at once while another reads it."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from clawstore.query import engine, segments, views
from clawstore.query.engine import run_query
from clawstore.query.manifest import compact_manifest, index_pending, refresh_manifest
from clawstore.store import Store
from tests.query.campaigns import Built, Spec, build

REPO = Path(__file__).resolve().parents[2]

# Each writer process refreshes its builds with a tiny compaction threshold, so publishing segments and
# merging packs race between processes.
WRITER = """
import sys
from clawstore.query import segments, views
from clawstore.query.manifest import refresh_manifest
from clawstore.store import Store
segments.COMPACT_AT = 2
store = Store(sys.argv[1], create=False)
for build_id in sys.argv[2:]:
    refresh_manifest(store, build_id)
"""


def _small_build(store: Store, i: int, refresh: bool = True) -> Built:
    """Build `i`: a campaign of its own (suite_<i>), one case, runs of its own."""
    return build(store, Spec(suite=f"suite_{i}", cases=["case_1"], run_salt=str(i)), refresh=refresh)


def test_concurrent_refreshes_are_all_visible_and_readers_never_fail(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    builds = [_small_build(store, i, refresh=False) for i in range(6)]
    observed: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                observed.append(run_query(store.root, "select count(*) from builds").rows[0][0])
            except BaseException as exc:  # noqa: BLE001 - any failure of a reader is the finding
                errors.append(exc)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.root),
                                     *(b.build_id for b in builds[i::3])], cwd=REPO, stderr=subprocess.PIPE,
                                    text=True) for i in range(3)]
        for proc in writers:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors
    assert list((store.root / "manifest" / "packs").iterdir()), "writers compacted while racing"
    assert observed == sorted(observed), "a reader never sees a build disappear"
    rows = run_query(store.root, "select count(*), count(distinct build_id), count(distinct campaign_id) "
                                 "from run_history").rows
    assert rows == [(12, 6, 6)]  # 2 runs per build, no duplicates, every build present
    index_pending(store)  # the campaign heads join the plain views
    assert run_query(store.root, "select count(*) from runs").rows == [(12,)]
    assert run_query(store.root, "select count(*) from builds").rows == [(6,)]


def test_a_pack_replaced_while_a_reader_looks_is_never_half_seen(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader lists the segments and the packs; a compaction then merges the waiting segments into a
    # new pack and deletes the one the reader was about to open. Seen in CI as a count of 6 builds
    # followed by 2: the reader fell back to "no pack" plus the two segments it had listed.
    monkeypatch.setattr(segments, "COMPACT_AT", 100)
    store = Store(tmp_path / "store")
    for i in range(4):
        _small_build(store, i)
        if i == 1:
            assert compact_manifest(store)  # a pack of two builds, two segments beside it
    manifest = store.root / "manifest"
    listed = segments._packs

    def compaction_lands_after_the_listing(root: Path) -> list[Path]:
        packs = listed(root)
        if packs and not raced:
            raced.append(True)
            assert compact_manifest(store)
        return packs

    raced: list[bool] = []
    monkeypatch.setattr(segments, "_packs", compaction_lands_after_the_listing)
    snap = segments.snapshot(manifest)
    assert raced
    assert snap.pack is not None and len(snap.covers) == 4 and not snap.segments
    assert run_query(store.root, "select count(*) from builds").rows == [(4,)]


def test_a_pack_replaced_after_the_snapshot_makes_the_reader_look_again(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader took its snapshot (a pack, no segment); another process then indexes a build and merges
    # it into a newer pack, deleting the one the snapshot names before the reader lists its chunks. The
    # reader saw no pack file and no segment: every build gone (`count(*)` 0), or, when the directory
    # vanished inside the listing, a FileNotFoundError (seen in CI).
    monkeypatch.setattr(segments, "COMPACT_AT", 100)
    store = Store(tmp_path / "store")
    for i in range(2):
        _small_build(store, i)
    assert compact_manifest(store)  # one pack of two builds, no segment beside it
    late = _small_build(store, 2, refresh=False)
    taken = views.snapshot
    raced: list[bool] = []

    def compaction_lands_after_the_snapshot(manifest: Path) -> segments.Snapshot:
        snap = taken(manifest)
        if not raced:
            raced.append(True)
            refresh_manifest(store, late.build_id)
            assert compact_manifest(store) and snap.pack is not None and not snap.pack.exists()
        return snap

    monkeypatch.setattr(views, "snapshot", compaction_lands_after_the_snapshot)
    assert run_query(store.root, "select count(*) from builds").rows == [(3,)]
    assert raced


def test_a_manifest_file_vanishing_after_the_first_rows_is_read_again_by_run_query(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # run_query (the spend history's reader) keeps every row before it hands any out: a compaction deleting a file
    # after its first batch makes it look again, as it did before rows were streamed (`claw query`, which has
    # written them, does not: tests/query/test_query_stream.py).
    store = Store(tmp_path / "store")
    _small_build(store, 0)
    manifest = store.root / "manifest"
    batches = engine.QueryRows.batches
    vanished: list[bool] = []

    def a_file_vanishes_after_the_first_batch(self: engine.QueryRows) -> Iterator[list[tuple[Any, ...]]]:
        for number, batch in enumerate(batches(self)):
            if number == 1 and not vanished:
                vanished.append(True)
                raise duckdb.IOException(f"IO Error: No files found that match the pattern \"{manifest}/x.parquet\"")
            yield batch

    monkeypatch.setattr(engine.QueryRows, "batches", a_file_vanishes_after_the_first_batch)
    count = 3 * engine.BATCH
    assert run_query(store.root, f"select range from range({count})").rows == [(i,) for i in range(count)]
    assert vanished
