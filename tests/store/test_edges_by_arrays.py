"""An edges file made by numpy (fsck's packs' helper: store/core/edgefile.py `EdgeLog.against(by_arrays=True)`,
`_placed_by_arrays`, `_tokens_by_arrays`) is byte for byte the file the pure loop makes (a build's seal, gc, fsck's own
process), and a log that does not fit its pack's table is refused either way."""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable

import pytest

from clawstore.store.core import edgefile
from clawstore.store.core.edgefile import ID, NO_FACT, EdgeLog, PackEdges, Table

Noted = list[tuple[int, list[bytes], tuple[int, list[int]] | None]]  # (row, what it names, a record's facts)


def _pack(seed: int, rows: int = 300) -> tuple[list[bytes], list[int], Noted]:
    """A pack's table (ids and offsets; an action entry's row every fourth, a blob twice) and what each object of it
    names (rows of the pack, ids of others named again and again, nothing; a record's facts every fifth)."""
    rng = random.Random(seed)
    ids = [rng.randbytes(ID) for _ in range(rows)]
    ids[rows // 2] = ids[3]  # (the same blob twice in the pack: its last row is named)
    offsets = [64 + 40 * row for row in range(rows)]
    outside = [rng.randbytes(ID) for _ in range(rows)]
    noted = []
    for row in range(rows):
        if row % 4 == 3:
            continue  # (an action entry: in the table, not noted)
        children = list(dict.fromkeys(rng.sample(ids, rng.randrange(4)) + rng.sample(outside[:40], rng.randrange(3))
                                      + rng.sample(outside, rng.randrange(5))))
        fact = (0, list(range(len(children)))[1:]) if row % 5 == 0 and children else None
        noted.append((row, children, fact))
    return ids, offsets, noted


def _log(ids: list[bytes], offsets: list[int], noted: Noted) -> EdgeLog:
    log = EdgeLog()
    for row, children, fact in noted:
        log.add(ids[row], offsets[row], children, fact)
    return log


def _both(make: Callable[[], EdgeLog], table: Table, verified: bool, monkeypatch: pytest.MonkeyPatch
          ) -> tuple[PackEdges | None, PackEdges | None, list[bool]]:
    """The file made by arrays and by the loop; whether `_tokens_by_arrays` answered, each call."""
    answered: list[bool] = []
    by_arrays = edgefile._tokens_by_arrays

    def noted(*args: object) -> object:
        found = by_arrays(*args)  # type: ignore[arg-type]
        answered.append(found is not None)
        return found

    monkeypatch.setattr(edgefile, "_tokens_by_arrays", noted)
    arrays = make().against("ab" * 8, table, verified, spend=True, by_arrays=True)
    loop = make().against("ab" * 8, table, verified, spend=True)
    return arrays, loop, answered


def _bytes(found: PackEdges | None) -> bytes | None:
    return None if found is None else b"".join(found.encode(1 << 20, bytes(32)))


@pytest.mark.parametrize("verified", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_file_made_by_arrays_is_the_loops(monkeypatch: pytest.MonkeyPatch, seed: int, verified: bool) -> None:
    ids, offsets, noted = _pack(seed)
    table = Table(b"".join(ids), array("Q", offsets))
    arrays, loop, answered = _both(lambda: _log(ids, offsets, noted), table, verified, monkeypatch)
    assert answered == [True] and arrays is not None and _bytes(arrays) == _bytes(loop)
    for row, children, fact in noted:
        assert arrays.children(ids[row], offsets[row]) == children
        if verified and fact is not None and row != 3:  # (row 3's id is row 150's too: found there)
            assert arrays.facts(ids[row], offsets[row]) == (children[0], children[1:])
    assert arrays.fact_keys.count(NO_FACT) == (len(ids) - sum(fact is not None for _, _, fact in noted)
                                               if verified else 0)


@pytest.mark.parametrize("case", ["shared first bytes", "past the dedup bound", "past BY_ARRAYS", "nothing named"])
def test_what_arrays_leave_to_the_loop_is_the_loops(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Ids that share their first 8 bytes (made so), more distinct others than the dicts dedupe, more ids named than
    the arrays take: the loop decides (the same file); nothing named: an empty file of edges."""
    ids, offsets, noted = _pack(7)
    if case == "shared first bytes":
        noted[5][1].append(ids[9][:8] + bytes(24))  # (a row's first bytes, not the row)
    if case == "past the dedup bound":
        monkeypatch.setattr(edgefile, "_DEDUP", 20)
    if case == "past BY_ARRAYS":
        monkeypatch.setattr(edgefile, "BY_ARRAYS", 50)
    if case == "nothing named":
        noted = [(row, [], None) for row, _, _ in noted]
    table = Table(b"".join(ids), array("Q", offsets))
    arrays, loop, answered = _both(lambda: _log(ids, offsets, noted), table, True, monkeypatch)
    assert arrays is not None and _bytes(arrays) == _bytes(loop)
    assert answered == [case == "nothing named"]


@pytest.mark.parametrize("wrong", ["order", "id", "offset", "past the end", "twice", "another pack's"])
def test_a_log_that_does_not_fit_its_table_is_refused_by_arrays_as_by_the_loop(
        monkeypatch: pytest.MonkeyPatch, wrong: str) -> None:
    ids, offsets, noted = _pack(5)
    table = Table(b"".join(ids), array("Q", offsets))
    if wrong == "order":
        noted[10], noted[11] = noted[11], noted[10]
    if wrong == "twice":
        noted.insert(10, noted[10])
    if wrong == "past the end":
        table = Table(table.ids[:-2 * ID], table.offsets[:-2])
    if wrong == "another pack's":
        table = Table(b"".join(reversed(ids)), table.offsets)

    def made() -> EdgeLog:
        log = _log(ids, offsets, noted)
        if wrong == "id":
            log.ids[20 * ID + 7] ^= 1
        if wrong == "offset":
            log.offsets[20] += 1
        return log

    arrays, loop, _ = _both(made, table, True, monkeypatch)
    assert arrays is None and loop is None
