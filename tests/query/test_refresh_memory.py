"""The first query after a build materialises its campaign's head a window of nodes at a time, its rows spilled to
files for DuckDB (query/spill.py): Python's memory does not grow with the campaign, and the files hold exactly the
rows flattening in memory gives (docs/query.md, Scale)."""

from __future__ import annotations

import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from clawstore.errors import StoreError
from clawstore.query import copied, heads, rows, segments, spill
from clawstore.query.engine import run_query
from clawstore.query.heads import StoredRecords, head_nodes, wanted_heads
from clawstore.query.manifest import index_current, index_pending, manifest_dir
from clawstore.query.rows import flatten
from clawstore.store import Store, headdoc, logstream
from clawstore.store.headdoc import head_fields
from tests.query.campaigns import Spec, build
from tests.support.fresh import measured_in_fresh_process

WINDOW = 16  # nodes read, rows written and nodes in a head's part at most in these tests (4,096, 4,096 and 1,024)


@pytest.fixture(autouse=True)
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(headdoc, "PART_MAX", WINDOW)  # (parts hash to 64 nodes on average, the largest grows with n)
    monkeypatch.setattr(rows, "READ_AHEAD", WINDOW)
    monkeypatch.setattr(spill, "CHUNK", WINDOW)


def _campaign(root: Path, cases: int) -> Store:
    store = Store(root)
    build(store, Spec(cases=[f"case_{n:04d}" for n in range(cases)], judge_reps=1), refresh=False)
    return store


def _refresh_peak(store: Store, index: Callable[[], object] | None = None) -> int:
    """Python's peak memory while the first query materialises the campaign's head, or while `index` runs (the
    store's own index of its objects, which grows with the store, loaded before: docs/store.md)."""
    store.get_json(next(iter(wanted_heads(store).values())))
    tracemalloc.start()
    try:
        index() if index is not None else index_current(store)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refresh_peak_alone(root: str, cases: str) -> int:
    """_refresh_peak of a campaign of `cases` built at `root` (WINDOW as the tests'), in a new interpreter
    (measured_in_fresh_process): in a test worker, what earlier tests left (their threads, their garbage's finalizers)
    would be counted too."""
    headdoc.PART_MAX, rows.READ_AHEAD, spill.CHUNK = WINDOW, WINDOW, WINDOW
    store = _campaign(Path(root), int(cases))
    try:
        return _refresh_peak(store)
    finally:
        store.close()


def test_the_first_refresh_holds_a_window_of_the_campaign_not_all_of_it(tmp_path: Path) -> None:
    small = measured_in_fresh_process(refresh_peak_alone, tmp_path / "small", 40)  # 320 nodes
    large = measured_in_fresh_process(refresh_peak_alone, tmp_path / "large", 160)  # 1,280 nodes
    # Holding every row (as before) it grew by 6.6 KB per node; now by the few facts kept per run for the results'
    # costs (0.14 KB per node; 19-20 bytes at session 70, alike at 160 and 320 cases: 320 until then).
    assert (large - small) / (1280 - 320) < 500, (small, large)


def _written(store: Store, out: Path, sink: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Each table of the campaign's head flattened into `sink`, written by DuckDB and read back in file order."""
    load = StoredRecords(store)
    doc = load(next(iter(wanted_heads(store).values())))
    assert isinstance(doc, dict)
    flat = flatten(head_fields(doc), load, load.read_ahead, head_nodes(doc, load), sink=sink)
    if sink is not None:
        sink.close()
    con = duckdb.connect()
    try:
        segments.write_tables(con, flat, out)
        return {table: con.execute(f"SELECT * FROM read_parquet('{out / table}.parquet')").fetchall()
                for table in ("runs", "checks", "judgements", "results", "nodes")}
    finally:
        con.close()


def test_spilled_rows_are_the_rows_flattening_in_memory_gives(tmp_path: Path) -> None:
    store = _campaign(tmp_path / "store", 30)  # 240 nodes: 15 windows, results held over 4 lines
    (manifest_dir(store.root) / "tmp").mkdir(parents=True)
    spilled = _written(store, tmp_path / "spilled", spill.Spill(segments.tmp_dir(manifest_dir(store.root), "rows")))
    in_memory = _written(store, tmp_path / "in-memory", None)
    assert spilled == in_memory and len(spilled["results"]) == 60
    assert {row[-4:] for row in spilled["results"]} != {None}  # (each with its run's costs)
    assert list((manifest_dir(store.root) / "tmp").iterdir()) == []  # the spill removed once written


def test_spilled_rows_are_written_once_and_never_read_again_as_none(tmp_path: Path) -> None:
    store = _campaign(tmp_path / "store", 2)
    load = StoredRecords(store)
    doc = load(next(iter(wanted_heads(store).values())))
    assert isinstance(doc, dict)
    sink = spill.Spill(segments.tmp_dir(manifest_dir(store.root), "rows"))
    flat = flatten(head_fields(doc), load, load.read_ahead, head_nodes(doc, load), sink=sink)
    sink.close()
    con = duckdb.connect()
    try:
        segments.write_tables(con, flat, tmp_path / "once")
        with pytest.raises(StoreError, match="written already"):
            segments.write_tables(con, flat, tmp_path / "twice")
    finally:
        con.close()


def _history_peak(store: Store) -> int:
    """Python's peak memory while the first query of the history views indexes the campaign's build (its log and
    records, every one flattened: no head to copy rows from), then gives its head the build's files."""
    indexed: list[int] = []
    peak = _refresh_peak(store, lambda: indexed.append(index_pending(store)))
    assert indexed == [1]
    return peak


def test_indexing_a_build_holds_neither_its_log_nor_its_head(tmp_path: Path) -> None:
    small = _history_peak(_campaign(tmp_path / "small", 40))  # 320 nodes
    large = _history_peak(_campaign(tmp_path / "large", 320))  # 2,560 nodes
    # Its rows were held until DuckDB wrote them (7.9 KB per node); spilled as they are made (query/spill.py), its log
    # and the head it wrote were still held whole (3.1 KB); now its log's nodes are read from its file one at a time
    # (store/logstream.py), that head's a part at a time, and what is kept of each node is its signature and action
    # (0.36 KB per node measured, with the head's signatures sorted beside them while compared: rows.same_rows).
    assert (large - small) / (2560 - 320) < 800, (small, large)


def copying_history_peak(root: str, cases: str) -> list[int]:
    """Python's peak memory while the first query of the history views indexes the campaign's build with the head a
    plain query materialised first as its copy source (every node's rows copied from it: copied.py), and how many
    nodes were taken; in a new interpreter (refresh_peak_alone)."""
    headdoc.PART_MAX, rows.READ_AHEAD, spill.CHUNK = WINDOW, WINDOW, WINDOW
    copied.FACTS_AT_ONCE, copied.TAKEN_AT_ONCE = WINDOW, WINDOW
    logstream.CHUNK = 4096  # (the log is read 1 MiB at a time: all of these logs at once)
    store = _campaign(Path(root), int(cases))
    taken: list[int] = []
    flatten = heads.flatten

    def counting(*args: Any, **kwargs: Any) -> rows.Flattened:
        made = flatten(*args, **kwargs)
        taken.append(len(made.taken))
        return made

    try:
        index_current(store)  # (the head: `claw query leaderboard` before `claw plan` reads the history)
        heads.flatten = counting
        return [_history_peak(store), *taken]
    finally:
        heads.flatten = flatten
        store.close()


def test_indexing_a_build_beside_its_head_holds_its_facts_packed(tmp_path: Path) -> None:
    small, *taken_small = measured_in_fresh_process(copying_history_peak, tmp_path / "small", 40)  # 320 nodes
    large, *taken_large = measured_in_fresh_process(copying_history_peak, tmp_path / "large", 160)  # 1,280 nodes
    assert taken_small == [320] and taken_large == [1280]  # (every node of the build copied from the head)
    # The head's facts were a dict of named tuples and the nodes taken a list of them (1.1 KB per node measured, at 160
    # and 320 cases alike); now both are arrays (copied.reusable, packed.py: 0.19-0.23 KB per node measured, the
    # actions noted one str each).
    assert (large - small) / (1280 - 320) < 450, (small, large)


def test_a_build_whose_segment_cannot_be_linked_gives_its_head_the_same_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _campaign(tmp_path / "store", 6)
    plain = ("runs", "checks", "judgements", "results", "nodes")
    assert index_pending(store) == 1  # the build's rows spilled into its segment, and its head linked to them
    linked = {table: run_query(store.root, f"select * from {table} order by all").rows for table in plain}
    assert len(linked["nodes"]) == 48

    def no_links(source: Path, target: Path) -> None:
        raise OSError("a file system without hard links")

    shutil.rmtree(manifest_dir(store.root))
    monkeypatch.setattr(segments.os, "link", no_links)
    assert index_pending(store) == 1  # the spilled rows were written once: the head's are flattened again
    assert {table: run_query(store.root, f"select * from {table} order by all").rows for table in plain} == linked


def test_a_segments_writer_holds_a_bounded_duckdb_and_spills_under_the_manifest(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """What writes a segment or head (the copied rows joined and sorted back into node order) holds at most
    WRITE_MEMORY, one thread, spilling into a directory under the manifest's tmp/ that is gone after; before, DuckDB's
    default: 80 % of the machine's memory (the copying refresh peaked at 505-518 MB at 10,000 x 5)."""
    seen: list[tuple[Any, ...]] = []
    write = segments.write_tables

    def recording(con: duckdb.DuckDBPyConnection, tables: Any, out: Path) -> None:
        seen.append(con.execute("SELECT current_setting('memory_limit'), current_setting('temp_directory'), "
                                "current_setting('threads')").fetchone() or ())
        write(con, tables, out)

    monkeypatch.setattr(segments, "write_tables", recording)
    manifest = tmp_path / "manifest"
    made = segments.write_segment_dir(manifest, "segment", {})
    [(limit, spill_dir, threads)] = seen
    number, unit = limit.split()
    assert float(number) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit] <= 128 * 10**6, limit
    assert Path(spill_dir).parent == manifest / "tmp" and threads == 1
    assert not Path(spill_dir).exists()
    assert sorted(path.name for path in made.iterdir()) == sorted(f"{table}.parquet" for table in rows.PHYSICAL)
