"""heads.streamed_rows sorts a range of keys at a time (SORT_ROWS rows): with the ranges cut to a row or a few, the rows
come in the order, and with the values, of the head's whole table sorted at once (the query before the ranges), whatever
the keys: null ones, one key with more rows than a range, ranges ending inside a run of one key's rows, case, accents,
an empty string, a NUL, emoji (DuckDB compares every range's bounds, so the order is DuckDB's throughout)."""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pytest

from clawstore.query import heads
from clawstore.query.heads import heads_dir, streamed_rows
from clawstore.query.schema import PHYSICAL
from clawstore.report.data import COLUMNS

_ODD = [None, "", "a", "A", "a ", "a\x00b", "B", "é", "e\u0301", "z", "Z", "ß", "ss", "😀", "m/1", "m-1", "m_1",
        "[x]", "'q'", '"q"']


def _head(manifest: Path, keys: list[tuple[str | None, str | None]]) -> None:
    """A head's nodes.parquet, a row for each of `keys` (model_id, case_id) in that order, row groups of 4 rows."""
    types = {column.name: column.type for column in PHYSICAL["nodes"]}
    folder = heads_dir(manifest) / "ab"
    folder.mkdir(parents=True)
    con = duckdb.connect()
    con.execute("CREATE TABLE k (i BIGINT, m VARCHAR, c VARCHAR)")
    if keys:
        con.executemany("INSERT INTO k VALUES (?, ?, ?)", [(i, m, c) for i, (m, c) in enumerate(keys)])
    made = {"model_id": "m", "case_id": "c", "kind": "'run'"}
    select = ", ".join(f'CAST({made.get(name, "i" if types[name] in ("BIGINT", "INTEGER") else "NULL")} AS '
                       f'{types[name]}) AS "{name}"' for name in COLUMNS["nodes"])
    con.execute(f"COPY (SELECT {select} FROM k ORDER BY i) TO '{folder}/nodes.parquet' (FORMAT parquet, "
                "ROW_GROUP_SIZE 4)")
    con.close()


def _sorted_whole(manifest: Path) -> list[dict[str, object]]:
    """The rows as streamed_rows sorted them before the ranges: the whole table at once."""
    path = heads_dir(manifest) / "ab" / "nodes.parquet"
    con = duckdb.connect()
    columns = ", ".join(f'"{name}"' for name in COLUMNS["nodes"])
    rows = con.execute(f"SELECT {columns} FROM read_parquet(?, file_row_number = true) "
                       "ORDER BY model_id, case_id, file_row_number", [str(path)]).fetchall()
    con.close()
    return [dict(zip(COLUMNS["nodes"], row, strict=True)) for row in rows]


def _keys() -> list[tuple[str | None, str | None]]:
    rnd = random.Random(5)
    keys = [(rnd.choice(_ODD), rnd.choice(_ODD)) for _ in range(300)]
    keys += [("m", "one key")] * 23  # (more rows than any range below)
    keys += [(None, None)] * 3
    rnd.shuffle(keys)
    return keys


@pytest.mark.parametrize("sort_rows", [1, 2, 3, 7, 16_384])
def test_ranges_of_keys_stream_the_rows_of_the_table_sorted_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   sort_rows: int) -> None:
    _head(tmp_path, _keys())
    monkeypatch.setattr(heads, "SORT_ROWS", sort_rows)
    streamed = list(streamed_rows(tmp_path, "sha256:ab", "nodes", COLUMNS["nodes"], ("model_id", "case_id")))
    whole = _sorted_whole(tmp_path)
    assert len(streamed) == len(whole) == 326
    assert streamed == whole


def test_an_empty_head_streams_no_row(tmp_path: Path) -> None:
    _head(tmp_path, [])
    assert list(streamed_rows(tmp_path, "sha256:ab", "nodes", COLUMNS["nodes"], ("model_id", "case_id"))) == []
