"""What `claw report` and `claw view` hold while their rows stream from the manifest (heads.streamed_rows) does not grow
with the campaign: DuckDB sorts a range of SORT_ROWS rows at a time, not the head's whole table (issue 54). DuckDB's
memory is not Python's, so it is the max RSS of a fresh interpreter streaming a head's nodes, at two sizes."""

from __future__ import annotations

from pathlib import Path

import duckdb

from clawstore.query.heads import heads_dir
from clawstore.query.schema import PHYSICAL
from clawstore.report.data import COLUMNS
from tests.support.fresh import measured_in_fresh_process

# Max RSS a head five times the rows may add (40,000 against 200,000 node rows, the report's columns). Measured
# 2026-12-05 at 400,000 rows: +63 MB with the table sorted whole (DuckDB's sort up to its 64 MB bound), +4 MB by
# ranges; session 70, at 200,000: +32.5 MB sorted whole (cb933a9c~1), +0.5 MB by ranges (400,000 until then).
GROWTH_BOUND = 20 * 2**20

_VALUES = {"model_id": "'m' || ((i // 4) % 5)", "case_id": "printf('case_%07d', i // 20)",
           "kind": "['run', 'checks', 'judge', 'result'][i % 4 + 1]", "status": "'success'",
           "action": "'exec'", "cost_source": "'reported'", "judge_run_id": "'judge/j'"}
_BY_TYPE = {"VARCHAR": "NULL", "INTEGER": "CAST(i % 3 AS INTEGER)", "BIGINT": "i % 997", "DOUBLE": "i * 0.001"}


def _head(manifest: Path, rows: int) -> None:
    """A head's nodes.parquet of `rows` rows in a head's order (case by case, each case's models together)."""
    types = {column.name: column.type for column in PHYSICAL["nodes"]}
    select = ", ".join(f'{_VALUES.get(name, _BY_TYPE[types[name]])}::{types[name]} AS "{name}"'
                       for name in COLUMNS["nodes"])
    folder = heads_dir(manifest) / "ab"
    folder.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(f"COPY (SELECT {select} FROM range({rows}) t(i) ORDER BY i) TO '{folder}/nodes.parquet' "
                "(FORMAT parquet, ROW_GROUP_SIZE 16384)")
    con.close()


def _stream(manifest: str) -> dict[str, object]:
    """Run in a fresh interpreter: every row streamed in the report's order; their count, whether in order, max RSS
    (the high-water mark of this process image: ru_maxrss would carry the forking pytest worker's over exec)."""
    from clawstore.query.heads import streamed_rows

    count, previous, ordered = 0, ("", ""), True
    for row in streamed_rows(Path(manifest), "sha256:ab", "nodes", COLUMNS["nodes"], ("model_id", "case_id")):
        key = (row["model_id"], row["case_id"])
        ordered &= key >= previous
        count, previous = count + 1, key
    peak = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return {"rows": count, "ordered": ordered, "max_rss": int(peak.split()[1]) * 1024}


def _streamed(manifest: Path) -> dict[str, int]:
    found: dict[str, int] = measured_in_fresh_process(_stream, manifest)
    return found


def test_streaming_a_heads_rows_holds_the_same_whatever_its_size(tmp_path: Path) -> None:
    measured = {}
    for rows in (40_000, 200_000):
        _head(tmp_path / f"manifest-{rows}", rows)
        measured[rows] = _streamed(tmp_path / f"manifest-{rows}")
        assert measured[rows]["rows"] == rows and measured[rows]["ordered"], measured
    grown = measured[200_000]["max_rss"] - measured[40_000]["max_rss"]
    assert grown < GROWTH_BOUND, f"max RSS grew by {grown / 2**20:.1f} MB for five times the rows: {measured}"
