"""write_array: one JSON array, written a chunk at a time."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from clawstore.query.jsonarray import write_array


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 7])
def test_the_file_is_the_array_of_every_item_whatever_the_chunks(tmp_path: Path, count: int) -> None:
    items = [{"n": i, "text": "é,\"]", "none": None, "list": [i, 1.5]} for i in range(count)]
    path = tmp_path / "rows.json"
    write_array(path, iter(items), chunk=2)
    assert json.loads(path.read_text(encoding="utf-8")) == items


def test_numbers_json_cannot_hold_are_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    write_array(path, [{"x": float("nan"), "y": [float("inf"), -float("inf"), 1.5]}])
    assert json.loads(path.read_text(encoding="utf-8")) == [{"x": None, "y": [None, None, 1.5]}]


def test_lone_surrogates_are_written_as_replacement_characters_duckdb_reads(tmp_path: Path) -> None:
    # (a record pulled from a hostile store can hold "\ud800": a str UTF-8 cannot encode)
    items = [{"n": 0, "text": "plain"}, {"n": 1, "text": "a\ud800b", "list": ["\udfff", "\U0001f600"],
                                         "k\udc00": 1}]
    path = tmp_path / "rows.json"
    write_array(path, iter(items), chunk=1)
    assert json.loads(path.read_text(encoding="utf-8")) == [
        {"n": 0, "text": "plain"}, {"n": 1, "text": "a\ufffdb", "list": ["\ufffd", "\U0001f600"], "k\ufffd": 1}]
    rows = duckdb.sql(f"select n, text from read_json('{path}', format='array', "
                      "columns={'n': 'INTEGER', 'text': 'VARCHAR'}) order by n").fetchall()
    assert rows == [(0, "plain"), (1, "a\ufffdb")]
