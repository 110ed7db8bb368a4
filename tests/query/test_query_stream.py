"""`claw query` streams its rows: memory that does not grow with the result, a reader that leaves early, an
error after rows were written, and no second run of a query whose rows were handed out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.cli.query_cmd import TERMINAL_ROWS
from clawstore.errors import UsageError
from clawstore.query.engine import QueryRows, stream_query
from clawstore.query.segments import ManifestChanged
from clawstore.store import Store
from tests.support.terminal import Terminal, terminal  # noqa: F401

ROWS_SQL = "SELECT range AS i, 'x' || range AS s FROM range({rows})"
SMALL, LARGE = 30_000, 300_000
# (30,000 and 300,000 rows: ~82-90 MB each. Before streaming (b5f4455e~1), 300,000 rows held +55.6 MB (csv), +248
# (json), +113 (table), +76 (markdown), +247 (--out .json), +65 (--out .parquet) over 30,000, each past the margin:
# 600,000 rows, as this test had until session 70, only doubled what each parametrization printed.)
MARGIN_MB = 25
# A cast that fails far into the rows: DuckDB computes a row group (122,880 rows) ahead on each of its threads (one
# a CPU), so rows come before the error when it fails beyond them. (Each row printed costs: 1,000,000 took 3 s.)
_FAILS_AT = min(1_000_000, ((os.cpu_count() or 1) + 1) * 122_880)
LATE_FAILURE = (f"SELECT range AS i, CAST(CASE WHEN range < {_FAILS_AT} THEN '1' ELSE 'x' END AS INTEGER) AS n "
                f"FROM range({_FAILS_AT + 200_000})")

# Peak RSS read by wait4 in a small launcher: a child's max RSS starts at the RSS of the process it was forked
# from (Linux carries it over exec), and a pytest worker's would floor every figure.
_LAUNCH = """
import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr)
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(Store(tmp_path_factory.mktemp("stream") / "store").root)


def _claw(*args: str) -> list[str]:
    return [sys.executable, "-m", "clawstore.cli", *args]


def _peak_mb(store: Path, rows: int, *args: str) -> float:
    """Max RSS of `claw query` printing `rows` rows (stdout to /dev/null), in MB."""
    done = subprocess.run([sys.executable, "-S", "-c", _LAUNCH,
                           *_claw("query", "--store", str(store), ROWS_SQL.format(rows=rows), *args)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    *_, last = done.stderr.splitlines()
    code, rss_kb = last.split()
    assert code == "0", done.stderr
    return int(rss_kb) / 1024


@pytest.mark.parametrize("args", [("--format", "csv"), ("--format", "json"), ("--format", "table"),
                                  ("--format", "markdown"), ("--out", "OUT.json"), ("--out", "OUT.parquet")])
def test_memory_does_not_grow_with_the_rows(store: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    args = tuple(a.replace("OUT", str(tmp_path / "out")) for a in args)
    small, large = _peak_mb(store, SMALL, *args), _peak_mb(store, LARGE, *args)
    assert large - small < MARGIN_MB, f"{SMALL:,} rows: {small:.1f} MB, {LARGE:,} rows: {large:.1f} MB"


def test_a_reader_that_leaves_ends_the_query_quietly(store: Path) -> None:
    # (rows without end: the first ones must come while the query runs, and the reader's leaving must end it)
    proc = subprocess.Popen(_claw("query", "--store", str(store), ROWS_SQL.format(rows=10**12), "--format", "csv"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        started = time.monotonic()
        head = [proc.stdout.readline() for _ in range(3)]
        proc.stdout.close()  # (`| head -3`)
        code = proc.wait(timeout=60)
        assert head == [b"i,s\n", b"0,x0\n", b"1,x1\n"] and time.monotonic() - started < 60
        assert code == 141 and proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_error_after_rows_were_printed_is_one_line_and_exit_2(store: Path) -> None:
    done = subprocess.run(_claw("query", "--store", str(store), LATE_FAILURE, "--format", "csv"),
                          capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert done.returncode == 2 and lines[:2] == ["i,n", "0,1"] and len(lines) > 1000
    [error] = done.stderr.splitlines()
    assert error.startswith("claw: error: query failed: Conversion Error"), done.stderr


@pytest.mark.parametrize("suffix", [".csv", ".json", ".md", ".parquet"])
def test_an_error_mid_way_leaves_no_file_under_the_name(store: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"rows{suffix}"
    old = b"the file as it was"
    out.write_bytes(old)
    done = subprocess.run(_claw("query", "--store", str(store), LATE_FAILURE, "--out", str(out)),
                          capture_output=True, text=True, timeout=120)
    [error] = done.stderr.splitlines()
    assert done.returncode == 2 and error.startswith("claw: error: query failed: Conversion Error"), done.stderr
    assert out.read_bytes() == old and os.listdir(tmp_path) == [out.name]  # (no temp file left beside)


def test_a_query_whose_rows_were_handed_out_is_not_run_again(store: Path) -> None:
    calls: list[int] = []

    def consume(rows: QueryRows) -> None:
        calls.append(len(next(rows.batches())))
        raise ManifestChanged("a pack was replaced")  # (what a compaction under the query raises)

    with pytest.raises(UsageError, match="query failed"):
        stream_query(store, ROWS_SQL.format(rows=5000), consume)
    assert calls == [1024]  # (run again, the rows it wrote would be written twice)

    def refuse(rows: QueryRows) -> None:
        calls.append(0)
        raise ManifestChanged("a pack was replaced")

    calls.clear()
    with pytest.raises(UsageError, match="4 times in a row"):
        stream_query(store, ROWS_SQL.format(rows=5000), refuse)
    assert calls == [0, 0, 0, 0]  # (nothing handed out: run again on a fresh snapshot)


def test_a_terminal_draws_the_first_rows_and_says_how_many_are_left_out(store: Path,
                                                                        terminal: Terminal) -> None:  # noqa: F811
    # (rich holds a whole table to measure it: a terminal shows TERMINAL_ROWS, then a note, not every row)
    terminal.width = 200  # (the note on one line)
    terminal.start(_claw("query", "--store", str(store), ROWS_SQL.format(rows=TERMINAL_ROWS + 3)), store.parent,
                   {"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "TERM": "xterm-256color",
                    "PATH": os.environ.get("PATH", "")})
    screen = terminal.wait_for(lambda shown: "EXIT=" in shown, timeout=120)
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    assert lines[-1] == "EXIT=0", screen
    assert lines[-3].split() == [str(TERMINAL_ROWS - 1), f"x{TERMINAL_ROWS - 1}"], screen
    note = f"claw: note: 3 more rows not shown (a terminal shows the first {TERMINAL_ROWS})"
    assert lines[-2].startswith(note), screen
