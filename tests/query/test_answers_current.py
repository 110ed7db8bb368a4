"""The current rows joined with their answers, materialised as a DuckDB file the views attach
(query/answers.py): made again when a build or the cache changes it, never read stale, rebuilt when
damaged, and safe with several `claw query` processes writing and reading it at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from clawstore.query.answers import cache_path
from clawstore.query.engine import run_query
from clawstore.query.manifest import manifest_dir
from clawstore.query.views import connect
from clawstore.store import Store
from tests.query.campaigns import Spec, build

REPO = Path(__file__).resolve().parents[2]
COUNTS = "select count(*), count(final_response) from runs"
ONE = "select final_response from runs where model_id = 'openai/gpt-a' and case_id = 'case_2'"


def _made(store: Store) -> list[Path]:
    return sorted(cache_path(manifest_dir(store.root), "runs").parent.glob("runs.current.*.duckdb"))


def _view(store: Store) -> str:
    """The SQL of the `runs` view a reader of the manifest gets now."""
    con = connect(manifest_dir(store.root))
    try:
        return str(con.execute("select sql from duckdb_views() where view_name = 'runs'").fetchone()[0])
    finally:
        con.close()


def _counts(path: Path) -> tuple[int, int]:
    """The rows and answers a materialised file holds, read whole (DuckDB checks every block it reads)."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{path}' AS made (READ_ONLY)").fetchall()
        con.execute("select bit_xor(hash(t)) from made.runs t").fetchall()
        [counts] = con.execute("select count(*), count(final_response) from made.runs").fetchall()
        return counts
    finally:
        con.close()


def test_a_new_build_or_a_rewritten_cache_is_never_read_through_the_old_file(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    build(store, Spec(suite="suite_0"))
    assert not _made(store)  # nothing before a query names runs
    assert run_query(store.root, COUNTS, store=store).rows == [(6, 6)]
    [first] = _made(store)
    assert "claw_runs.runs" in _view(store)  # the view reads the file, not the join
    assert run_query(store.root, ONE, store=store).rows == [("openai/gpt-a answers case_2",)]

    build(store, Spec(suite="suite_1", run_salt="1"))  # new campaign heads: the file is stale
    assert "claw_runs" not in _view(store)  # a reader that writes nothing joins the cache instead
    assert run_query(store.root, COUNTS).rows == [(12, 12)]
    assert _made(store) == [first]
    assert run_query(store.root, COUNTS, store=store).rows == [(12, 12)]
    [second] = _made(store)
    assert second != first  # made again for the new heads; the stale one removed
    assert "claw_runs.runs" in _view(store)

    cache = cache_path(manifest_dir(store.root), "runs")
    copy = cache.with_name("copy.tmp")
    copy.write_bytes(cache.read_bytes())
    os.replace(copy, cache)  # a cache rewritten by another query (the same rows here)
    assert "claw_runs" not in _view(store)
    assert run_query(store.root, COUNTS, store=store).rows == [(12, 12)]
    [third] = _made(store)
    assert third not in (first, second)


@pytest.mark.parametrize("damaged", ["materialised", "cache"])
def test_a_damaged_answers_file_is_made_again_not_trusted(tmp_path: Path, damaged: str) -> None:
    store = Store(tmp_path / "store")
    build(store, Spec(suite="suite_0"))
    assert run_query(store.root, COUNTS, store=store).rows == [(6, 6)]
    [made] = _made(store)
    cache = cache_path(manifest_dir(store.root), "runs")
    if damaged == "materialised":
        made.write_bytes(os.urandom(made.stat().st_size))  # the same name and size, nothing readable
    else:
        os.truncate(cache, cache.stat().st_size // 2)  # a crash mid-write, say
    assert run_query(store.root, ONE, store=store).rows == [("openai/gpt-a answers case_2",)]
    assert run_query(store.root, COUNTS, store=store).rows == [(6, 6)]
    [again] = _made(store)
    assert _counts(again) == (6, 6)
    assert duckdb.connect().execute(f"select count(*) from read_parquet('{cache}')").fetchall() == [(6,)]


# A reader process: `claw query`'s run_query on runs over and over (each one may refresh the caches and
# write the file too) until the stop file appears and it saw the last build; every answer must be there
# in every result (every campaign's runs share the first one's artifacts, cached before they start), and
# no result may go back to fewer runs.
READER = """
import sys, pathlib
from clawstore.query.engine import run_query
from clawstore.store import Store
store, stop, last = Store(sys.argv[1], create=False), pathlib.Path(sys.argv[2]), int(sys.argv[3])
seen = []
while not (stop.exists() and seen and seen[-1] == last):
    [(runs, answered)] = run_query(store.root, "select count(*), count(final_response) from runs", store=store).rows
    assert runs == answered and runs % 6 == 0 and (not seen or runs >= seen[-1]), (runs, answered, seen[-3:])
    seen.append(runs)
print(len(seen), seen[-1])
"""


def test_readers_and_writers_of_the_answers_files_at_once_never_fail(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    build(store, Spec(suite="suite_0"))
    assert run_query(store.root, COUNTS, store=store).rows == [(6, 6)]
    stop = tmp_path / "stop"
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(store.root), str(stop), "24"], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for i in range(1, 4):
            build(store, Spec(suite=f"suite_{i}", run_salt=str(i)))  # new heads, old ones removed
            assert run_query(store.root, COUNTS, store=store).rows == [(6 * (i + 1), 6 * (i + 1))]
            time.sleep(0.2)  # (the readers query this state too)
    finally:
        stop.touch()
        outputs = [_finished(proc) for proc in readers]
    for proc, (out, err) in zip(readers, outputs, strict=True):
        assert proc.returncode == 0, err
        queries, last = map(int, out.split())
        assert queries > 1 and last == 24
    [made] = _made(store)
    assert _counts(made) == (24, 24)



def _finished(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()  # (its return code then fails the test)
        return proc.communicate()
