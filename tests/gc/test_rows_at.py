"""The walk's look-ups read index rows in place (reach_arrays.rows_at, HeldArrays.locate): asked in order or not, a row
asked twice or not, read in one run or many, each answer is the row asked for, in the order asked. `locate` sorts the
ids it is asked once and reads each table in that order; what it answers is what `Entries.find_object` answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawstore.store import reach_arrays
from clawstore.store.core import index
from clawstore.store.core.index import HeldObjects, Segment

_N = 3000


def _table(tmp_path: Path) -> tuple[index.Table, list[tuple[bytes, index.Loc]]]:
    rng = np.random.default_rng(5)
    digests = sorted({rng.bytes(32) for _ in range(_N)})
    objects = {digest: (f"{i % 3:032x}", 1000 + i, 7 + i) for i, digest in enumerate(digests)}
    (tmp_path / "index").mkdir()
    (tmp_path / "tmp").mkdir()
    index.write_segment(tmp_path / "index", tmp_path / "tmp", Segment("a" * 32, objects=objects))
    return index.open_table(tmp_path / "index", "a" * 32), sorted(objects.items())


@pytest.mark.parametrize(("rows_read", "gap"), [(reach_arrays.ROWS_READ, reach_arrays._GAP), (7, 64), (64, 0),
                                                (100, 3)])
def test_rows_come_back_in_the_order_asked_each_as_often_as_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_read: int, gap: int) -> None:
    """In order with repeats (the path that skips the sort), out of order with repeats, in order once each (returned as
    read), one row, none: every answer the row asked for. A row put in another's place, a repeat dropped or a row of
    the wrong read fails here."""
    monkeypatch.setattr(reach_arrays, "ROWS_READ", rows_read)
    monkeypatch.setattr(reach_arrays, "_GAP", gap)
    table, objects = _table(tmp_path)
    rng = np.random.default_rng(9)
    sparse = np.sort(rng.choice(_N, 200, replace=False))
    asks = {
        "ordered, repeats": np.sort(rng.integers(0, _N, 4000)),
        "unordered, repeats": rng.integers(0, _N, 4000),
        "ordered, once each": sparse,
        "unordered, once each": rng.permutation(sparse),
        "every row": np.arange(_N),
        "the last row twice": np.array([_N - 1, _N - 1]),
        "one": np.array([17]),
        "none": np.zeros(0, np.int64),
    }
    try:
        for name, rows in asks.items():
            found = reach_arrays.rows_at(table, rows.astype(np.int64))
            assert len(found) == len(rows), name
            for row, got in zip(rows.tolist(), found, strict=True):
                digest, (pack, offset, length) = objects[row]
                assert (got["digest"].ljust(32, b"\0"), int(got["offset"]), int(got["length"])) == (
                    digest, offset, length), name
                assert table.packs[int(got["slot"])] == pack, name
    finally:
        table.close()


def test_locate_answers_in_the_order_asked_as_find_object_does(tmp_path: Path) -> None:
    """Ids asked out of order, some twice, some the index lacks, one sharing a stored id's first 8 bytes (its key
    matched, its whole id not): each answered where it was asked, as the index's own look-up answers it."""
    table, objects = _table(tmp_path)
    try:
        finder = HeldObjects(index.Entries(tables=[table]), limit=0)
        held = reach_arrays.HeldArrays(finder)
        rng = np.random.default_rng(3)
        asked = [objects[i][0] for i in rng.integers(0, _N, 5000).tolist()]
        asked += [rng.bytes(32) for _ in range(50)]
        asked += [objects[10 + at][0][:at] + bytes([objects[10 + at][0][at] ^ 1]) + objects[10 + at][0][at + 1:]
                  for at in range(8, 32)]  # (a stored id but for a byte past its key: each word compared)
        order = rng.permutation(len(asked)).tolist()
        asked = [asked[i] for i in order]
        rows, packs, offsets, lengths = held.locate(np.array(asked, dtype="S32"))
        entries = index.Entries(tables=[table])
        for at, digest in enumerate(asked):
            loc = entries.find_object(digest)
            if loc is None:
                assert rows[at] in (reach_arrays.NOT_FOUND, reach_arrays.SMALL)
                continue
            assert rows[at] >= 0 and held.packs[packs[at]] == loc[0]
            assert (int(offsets[at]), int(lengths[at])) == loc[1:]
            assert finder.row_of(digest) == (rows[at], loc[0])
    finally:
        table.close()


def test_ids_are_the_same_as_words_exactly_where_they_are_the_same_as_bytes() -> None:
    """same_ids compares 32-byte ids as four words: an id differing from its neighbour in any one of its bytes (or
    only in a trailing zero byte, which numpy's `S32` drops) is told apart, from `S32` ids and from rows alike."""
    rng = np.random.default_rng(7)
    ids = [rng.bytes(32) for _ in range(64)] + [bytes(31) + b"\x01", bytes(32)]
    others = [digest[:at] + bytes([digest[at] ^ 0x80]) + digest[at + 1:] for at, digest in enumerate(ids[:32])]
    others += ids[32:64] + [bytes(32), bytes(32)]
    rows = np.zeros(len(ids), reach_arrays._ROW)
    rows["digest"] = np.array(ids, dtype="S32")
    expected = [mine == theirs for mine, theirs in zip(ids, others, strict=True)]
    for mine in (np.array(ids, dtype="S32"), rows):
        assert reach_arrays.same_ids(mine, np.array(others, dtype="S32")).tolist() == expected


@pytest.mark.parametrize("kind", ["small, repeats", "wide", "negative", "uint64 keys", "one", "none"])
def test_the_packed_sorts_order_as_a_stable_argsort_does(kind: str) -> None:
    """sort_order is a stable argsort (each value packed above its position and those sorted; where a value and a
    position do not fit 64 bits, or a value is negative, an argsort), first_of_each what `np.unique` answers with
    `return_index`, and near_order an order sorted but for bits a position takes, by position among those that agree
    above them: a position misplaced, a tie out of place or a value's bits lost fails here."""
    rng = np.random.default_rng(11)
    values = {
        "small, repeats": rng.integers(0, 300, 5000),
        "wide": rng.integers(0, 1 << 62, 5000),  # (a value and 13 bits of a position do not fit 64 bits)
        "negative": rng.integers(-5, 300, 5000),
        "uint64 keys": rng.integers(0, 1 << 64, 5000, dtype=np.uint64, endpoint=False),
        "one": np.array([7]),
        "none": np.zeros(0, np.int64),
    }[kind]
    order = reach_arrays.sort_order(values)
    assert order.dtype == np.int64 and order.tolist() == np.argsort(values, kind="stable").tolist()
    unique, first = reach_arrays.first_of_each(values)
    expected_unique, expected_first = np.unique(values, return_index=True)
    assert unique.tolist() == expected_unique.tolist() and first.tolist() == expected_first.tolist()
    near = reach_arrays.near_order(values)
    assert sorted(near.tolist()) == list(range(len(values)))  # (each position once)
    if kind == "negative":
        assert near.tolist() == order.tolist()
    elif len(values) > 1:
        shift = max(len(values) - 1, 1).bit_length()
        high = values[near].astype(np.uint64) >> np.uint64(shift)
        assert not (high[1:] < high[:-1]).any()
        ties = np.flatnonzero(high[1:] == high[:-1])
        assert (near[ties] < near[ties + 1]).all()


def test_ids_whose_keys_agree_but_for_their_lowest_bits_are_located_in_any_order(tmp_path: Path) -> None:
    """`locate` takes its ids in near_order (their keys sorted but for the bits a position takes): ids whose keys
    differ only there, asked in reverse, leave the search and `rows_at` out of order, each answer still the row of its
    own id."""
    table, objects = _table(tmp_path)
    try:
        finder = HeldObjects(index.Entries(tables=[table]), limit=0)
        held = reach_arrays.HeldArrays(finder)
        base = objects[1500][0]
        neighbours = [base[:7] + bytes([(base[7] & 0xF0) | low]) + base[8:] for low in range(16)]
        asked = [digest for digest, _ in objects[::-7]] + neighbours[::-1]  # (stored ids in reverse, then the rest)
        rows, _, offsets, _ = held.locate(np.array(asked, dtype="S32"))
        entries = index.Entries(tables=[table])
        for at, digest in enumerate(asked):
            loc = entries.find_object(digest)
            assert (rows[at] >= 0) == (loc is not None)
            if loc is not None:
                assert finder.row_of(digest) == (rows[at], loc[0]) and int(offsets[at]) == loc[1]
    finally:
        table.close()
