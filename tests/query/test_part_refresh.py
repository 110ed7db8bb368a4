"""The first query after a build copies the rows of the head parts the build left alone from the campaign's previous
head and flattens only the parts it changed (query/parted.py): every table exactly as a full refresh gives it, and a
refresh killed mid-copy leaves the manifest as it was."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import duckdb
import pytest

from clawstore.query import copied, heads, parted
from clawstore.query.engine import run_query
from clawstore.query.manifest import index_current, manifest_dir
from clawstore.query.schema import PHYSICAL
from clawstore.store import Store, headdoc
from tests.query.campaigns import Spec, build, count_flattened
from tests.support.fresh import measured_in_fresh_process

PART_MAX = 8  # nodes in a head's part at most here (1,024): a small campaign in many parts
CASES = [f"case_{n:03d}" for n in range(24)]  # 2 models: 48 runs, 240 nodes, ~30 parts


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(headdoc, "PART_MAX", PART_MAX)


def head_tables(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the current head's directory, every column (the hidden ones too), in file order."""
    root = heads.heads_dir(manifest_dir(store.root))
    (hexid,) = set(heads.read_current(manifest_dir(store.root)).values())
    with duckdb.connect() as con:
        return {table: con.execute("SELECT * FROM read_parquet(?)", [str(root / hexid / f"{table}.parquet")]).fetchall()
                for table in PHYSICAL}


def full_refresh(store: Store, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[Any, ...]]]:
    """The head's tables made again from nothing: every node read and flattened."""
    with monkeypatch.context() as patch:
        patch.setattr(parted, "refresh", lambda *args: None)
        patch.setattr(copied, "reusable", lambda source: None)
        shutil.rmtree(heads.heads_dir(manifest_dir(store.root)))
        index_current(store)
        return head_tables(store)


def first_build(store: Store) -> None:
    build(store, Spec(cases=CASES), refresh=False)
    index_current(store)  # (the cold refresh: its head's directory names its parts)
    assert list(heads.heads_dir(manifest_dir(store.root)).glob(f"*/{parted.PARTS}"))


def spy_refresh(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each parted.refresh returns from now on (None: it gave way to the full refresh)."""
    made: list[Any] = []
    real = parted.refresh

    def spying(*args: Any) -> Any:
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(parted, "refresh", spying)
    return made


SMALL_CHANGE = Spec(cases=[*CASES, "case_new"], fail={("openai/gpt-a", "case_007")})  # a case more, a run failed


def test_a_small_build_flattens_its_changed_parts_and_gives_every_row_a_full_refresh_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    first_build(store)
    flattened = count_flattened(monkeypatch)
    made = spy_refresh(monkeypatch)
    again = build(store, SMALL_CHANGE, refresh=False)
    assert again.reused > 200 and again.executed >= 5
    index_current(store)
    assert made and made[-1] is not None  # the part-level refresh did it
    assert 5 < len(flattened) < 60  # the changed parts' nodes, not the campaign's 250
    part_level = head_tables(store)
    views = {view: run_query(store.root, f"select * from {view}").rows for view in ("runs", "results", "nodes")}
    assert {row[0] for row in part_level["nodes"] if row} and len(part_level["nodes"]) == 250
    assert full_refresh(store, monkeypatch) == part_level  # every table, every column, in file order
    assert {view: run_query(store.root, f"select * from {view}").rows for view in views} == views


def test_the_rows_of_a_refresh_that_copies_parts_are_copied_again_by_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    first_build(store)
    build(store, SMALL_CHANGE, refresh=False)
    index_current(store)
    flattened = count_flattened(monkeypatch)
    build(store, Spec(cases=[*CASES, "case_new"], salt="rubric v2", judge_reps=2), refresh=False)
    index_current(store)  # (every judgement and result changed: most parts new, the full refresh)
    build(store, Spec(cases=[*CASES, "case_new", "case_newer"], salt="rubric v2"), refresh=False)
    flattened.clear()
    index_current(store)
    assert len(flattened) < 40
    assert full_refresh(store, monkeypatch) == head_tables(store)


def test_a_previous_head_without_its_parts_is_refreshed_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    store = Store(tmp_path / "store")
    first_build(store)
    for found in heads.heads_dir(manifest_dir(store.root)).glob(f"*/{parted.PARTS}"):
        found.write_text('{"rows": "another flattening", "parts": []}')
    build(store, SMALL_CHANGE, refresh=False)
    made = spy_refresh(monkeypatch)
    index_current(store)
    assert made == [None]  # (copied node by node: every part read, every node signed)
    assert full_refresh(store, monkeypatch) == head_tables(store)


def test_a_previous_head_whose_parts_do_not_match_its_rows_is_not_copied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    first_build(store)
    (directory,) = [d for d in heads.heads_dir(manifest_dir(store.root)).iterdir() if d.is_dir()]
    old = parted.read_parts(directory)
    assert old is not None and old.nodes == 240
    doc = json.loads((directory / parted.PARTS).read_text())
    doc["parts"][0][1] += 1  # one part a node longer than its rows: every later part's rows would be off by one
    (directory / parted.PARTS).write_text(json.dumps(doc))
    build(store, SMALL_CHANGE, refresh=False)
    made = spy_refresh(monkeypatch)
    index_current(store)
    assert made == [None]
    assert not list((manifest_dir(store.root) / "tmp").glob("*"))  # what it began is gone
    assert full_refresh(store, monkeypatch) == head_tables(store)


KILLED_MID_COPY = """
import os, sys, time
from pathlib import Path
from clawstore.query import parted
from clawstore.query.manifest import index_current
from clawstore.store import Store

real = parted._results
def slow(work):
    shape = real(work)
    def pausing(table, source):
        if table == "results":  # (nodes, runs, checks and judgements written)
            Path(sys.argv[2]).write_text(str(sorted(p.name for p in work.iterdir())))
            time.sleep(60)
        return shape(table, source)
    return pausing
parted._results = slow
index_current(Store(Path(sys.argv[1])))
"""


def test_a_refresh_killed_mid_copy_leaves_the_previous_head_and_the_next_query_makes_the_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    first_build(store)
    manifest = manifest_dir(store.root)
    before = heads.read_current(manifest)
    old_rows = head_tables(store)
    build(store, SMALL_CHANGE, refresh=False)
    signal_file = tmp_path / "copying"
    child = subprocess.Popen([sys.executable, "-c", KILLED_MID_COPY, str(store.root), str(signal_file)],
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        deadline = time.monotonic() + 60
        while not signal_file.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert signal_file.exists(), "the refresh never reached its copy"
        assert "nodes.parquet" in signal_file.read_text()  # killed with some of the new head's files written
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert heads.read_current(manifest) == before  # the old head, whole: nothing of the new one published
    assert head_tables(store) == old_rows
    assert [d.name for d in heads.heads_dir(manifest).iterdir() if d.is_dir()] == list(before.values())
    index_current(store)  # the next query makes the new head (the killed one's leftovers under tmp/ aside)
    assert heads.read_current(manifest) != before
    assert full_refresh(store, monkeypatch) == head_tables(store)


def test_a_head_whose_parts_are_all_known_is_copied_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous head's directory under another name (as docs/query.md measures it): every row copied, no record
    read, and the same rows."""
    store = Store(tmp_path / "store")
    first_build(store)
    manifest = manifest_dir(store.root)
    before = head_tables(store)
    ((campaign, hexid),) = heads.read_current(manifest).items()
    os.rename(heads.heads_dir(manifest) / hexid, heads.heads_dir(manifest) / "renamed")
    heads.publish_current(manifest, {campaign: "renamed"})
    flattened = count_flattened(monkeypatch)
    made = spy_refresh(monkeypatch)
    index_current(store)
    assert flattened == [] and made[0] is not None
    assert head_tables(store) == before


def test_a_part_level_refresh_that_fails_after_flattening_leaves_nothing_and_gives_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB out of memory (or the source removed) while the new head is written: the full refresh, tmp/ empty."""
    store = Store(tmp_path / "store")
    first_build(store)
    build(store, SMALL_CHANGE, refresh=False)

    def out_of_memory(*args: Any, **kwargs: Any) -> None:
        raise duckdb.OutOfMemoryException("Out of Memory Error: as at 10,000 x 5 with 128 MB")

    made = spy_refresh(monkeypatch)
    with monkeypatch.context() as patch:
        patch.setattr(parted, "_load_kept", out_of_memory)  # (after the new parts' rows were spilled)
        index_current(store)
    assert made == [None]
    assert not list((manifest_dir(store.root) / "tmp").glob("*"))
    assert full_refresh(store, monkeypatch) == head_tables(store)


def refresh_peak_alone(root: str, cases: str) -> tuple[int, bool]:
    """Python's peak memory while the first query after a build of one case more refreshes a campaign of `cases`, and
    whether that refresh was the parted one (the first: cold). Called in a new interpreter (measured_in_fresh_process):
    in a test worker, what earlier tests left (their threads, their garbage's finalizers) would be counted too."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(headdoc, "PART_MAX", PART_MAX)
        made = spy_refresh(monkeypatch)
        store = Store(Path(root))
        names = [f"case_{n:04d}" for n in range(int(cases))]
        build(store, Spec(cases=names, judge_reps=1), refresh=False)
        index_current(store)
        build(store, Spec(cases=[*names, "case_new"], judge_reps=1), refresh=False)
        store.get_json(next(iter(heads.wanted_heads(store).values())))  # (the store's index, loaded before)
        tracemalloc.start()
        try:
            index_current(store)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return peak, len(made) == 2 and made[1] is not None


def test_the_part_level_refresh_holds_what_changed_not_the_campaign(tmp_path: Path) -> None:
    small, small_parted = measured_in_fresh_process(refresh_peak_alone, tmp_path / "small", 40)  # 320 nodes
    large, large_parted = measured_in_fresh_process(refresh_peak_alone, tmp_path / "large", 320)  # 2,560 nodes
    assert small_parted and large_parted  # (each first refresh: cold; the second by parts)
    # The copying refresh grew by 1,049 bytes a node (a dict entry of facts, a taken node, a signature); this one by
    # 81: the head document (a part id per 8 nodes here, 64 in a real head) and the kept ranges, a few per part.
    assert (large - small) / (2560 - 320) < 200, (small, large)
