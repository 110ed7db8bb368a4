"""A pack's edges file as arrays (reach_arrays.PackArrays) against the index read row by row in plain Python: each file
row's index row, each index row's file row (`file_rows`), and the row a blob stored twice stands for (`alias`), on a
store whose index has several tables (a pack's rows in two of them: their ids not in one sorted run) and a pack holding
blobs twice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawstore.store import Store, edges, reach_arrays
from clawstore.store.reach import Reach
from tests.gc.test_reach_arrays import Built, _copied, built  # noqa: F401  (a fixture)


@pytest.mark.parametrize("span", [reach_arrays.SPAN, 0])
def test_a_packs_rows_are_matched_to_the_index_as_read_row_by_row(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, span: int) -> None:  # noqa: F811
    """(SPAN 0: each index row's file row found by a search of the file's index rows sorted, as past SPAN rows.)"""
    monkeypatch.setattr(reach_arrays, "SPAN", span)
    store, _ = _copied(built, tmp_path, monkeypatch)
    walk = Reach(Store(store.root, create=False), cached=True)
    finder = walk._find_rows()
    held = walk._held_arrays(finder)
    assert held is not None
    # Every table row in order: (global row, digest, pack, offset), as the walk numbers them
    table_rows = [(first + i, digest, loc)
                  for table, first in finder._rest for i, (digest, loc) in enumerate(table.iter_objects())]
    aliased = two_tables = unnamed = 0
    for pack in held.packs:
        found = edges.load(store.root, store.runtime.packs_dir, pack)
        if found is None:
            continue
        arrays = reach_arrays.PackArrays(found, held, np.zeros(len(found.known) // 32, np.uint8))
        offsets = np.frombuffer(found.offsets, dtype=np.uint64).tolist()
        known = [found.known[at * 32:(at + 1) * 32] for at in range(arrays.rows)]
        at_offset = {offset: at for at, offset in enumerate(offsets)}
        expected = [-1] * arrays.rows
        tables_of_pack = set()
        for row, digest, (row_pack, offset, _) in table_rows:
            if row_pack != pack:
                continue
            tables_of_pack.add(next(first for _, first in reversed(finder._rest) if first <= row))
            first_row = finder.row_of(digest)
            at = at_offset.get(offset)
            if first_row is None or first_row[0] < 0 or at is None or known[at] != digest:
                continue
            expected[at] = first_row[0]
        assert arrays.index_row.tolist() == expected
        two_tables += len(tables_of_pack) > 1
        # Each index row's file row: one the file matched to it, -1 where none
        asked = np.arange(finder.rows + 3)  # (and rows past the tables')
        answers = arrays.file_rows(asked).tolist()
        for row, at in zip(asked.tolist(), answers, strict=True):
            assert (at >= 0 and expected[at] == row) or (at == -1 and row not in expected)
        # A row the index does not name, and an id of the file names, stands for a row matched to the row it names
        # of that id, in this pack (a row no id names is never walked through its alias: it aliases itself)
        named_here = {token for token in found.tokens if token < arrays.rows}
        for at in range(arrays.rows):
            first_row = finder.row_of(known[at]) if expected[at] < 0 else None
            if first_row is not None and first_row[0] >= 0 and first_row[1] == pack and first_row[0] in expected:
                if at in named_here:
                    assert expected[arrays.alias[at]] == first_row[0]
                    aliased += 1
                    continue
                unnamed += 1  # (a copy no id of the file names)
            assert arrays.alias[at] == at
    assert aliased > 10 and unnamed and two_tables  # (blobs stored twice, named or not; a pack's rows in two tables)
