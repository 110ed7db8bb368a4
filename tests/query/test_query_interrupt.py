"""Ctrl-C stops a query DuckDB is still computing: one line, exit 130, no file left under --out's name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.prepared import claw_here

LONG = "select sum(range) from range(100000000000)"  # (minutes of DuckDB's work before its one row)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("args, stop", [((), signal.SIGINT), (("-o", "out.parquet"), signal.SIGTERM)],
                         ids=["table-sigint", "parquet-sigterm"])
def test_a_long_query_stops_at_ctrl_c(tmp_path: Path, args: tuple[str, ...], stop: signal.Signals) -> None:
    # DuckDB looks at Python's signals only now and then: the query went on after Ctrl-C (until killed), or ended in
    # a `RuntimeError: Query interrupted` traceback, exit 1 (before session 72).
    store = tmp_path / "store"
    code, _, err = claw_here("put", str(Path(__file__)), "--store", str(store), cwd=tmp_path)  # (a store)
    assert code == 0, err
    query = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "query", "--store", str(store), *args, LONG],
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # Loading and the views take well under 1.8 s of CPU; the query's threads pass it within a second.
        deadline = time.monotonic() + 60
        while _cpu_seconds(query.pid) < 1.8 and query.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert query.poll() is None, query.communicate()[1]
        query.send_signal(stop)
        try:
            _, err = query.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail("the query went on after the signal")
    finally:
        if query.poll() is None:
            query.kill()
            query.communicate()
    assert (query.returncode, err) == (130, "claw: interrupted\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # (no out.parquet, nor DuckDB's tmp_out.parquet)
