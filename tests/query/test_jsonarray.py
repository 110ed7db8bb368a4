"""write_array: one JSON array, written a chunk at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.query.jsonarray import write_array


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 7])
def test_the_file_is_the_array_of_every_item_whatever_the_chunks(tmp_path: Path, count: int) -> None:
    items = [{"n": i, "text": "é,\"]", "none": None, "list": [i, 1.5]} for i in range(count)]
    path = tmp_path / "rows.json"
    write_array(path, iter(items), chunk=2)
    assert json.loads(path.read_text(encoding="utf-8")) == items


def test_a_value_json_cannot_hold_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_array(tmp_path / "rows.json", [{"x": float("nan")}])
