"""gc's plan rows in a temporary file (store/services/gc_kept.py), with its buffers shrunk to a few rows: read back in
key order whatever order they came in, the moved ones in the order of their places, moves and drops kept, a key twice
refused, and nothing but the buffers held; the same when the disk refuses the file at its first write, part way
through the rows, or at a rewrite in place (the rows then held in memory)."""

from __future__ import annotations

import errno
import random
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store.core.index import ActionEntry
from clawstore.store.services import gc_kept
from clawstore.store.services.gc_kept import KeptEntries, KeptObjects

_OBJ = struct.Struct("<32sIQQ")


@pytest.fixture(autouse=True, params=[None, 0, 3, 12], ids=["room", "full", "fills", "full-at-a-rewrite"])
def _small_buffers(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    monkeypatch.setattr(gc_kept, "SPILL_ROWS", 7)
    monkeypatch.setattr(gc_kept, "COPY_ROWS", 5)
    if request.param is not None:
        monkeypatch.setattr(gc_kept, "_write_all", _refused_after(request.param, gc_kept._write_all))


def _refused_after(writes: int, write_all: Callable[[int, bytes, int], None]) -> Callable[[int, bytes, int], None]:
    """`_write_all` on a disk that is full after `writes` writes (the next one half written)."""
    done = [0]

    def refusing(fd: int, data: bytes, at: int) -> None:
        done[0] += 1
        if done[0] > writes:
            write_all(fd, data[:len(data) // 2], at)
            raise OSError(errno.ENOSPC, "No space left on device")
        write_all(fd, data, at)

    return refusing


def _digest(i: int) -> bytes:
    return random.Random(i).randbytes(32)


def _decoded(packs: list[str], batches: list[bytes]) -> list[tuple[bytes, tuple[str, int, int]]]:
    rows = _OBJ.iter_unpack(b"".join(batches))
    return [(digest, (packs[slot], offset, length)) for digest, slot, offset, length in rows]


def test_rows_come_back_by_id_with_their_moves_and_without_the_dropped(tmp_path: Path) -> None:
    rows = KeptObjects(tmp_path)
    packs = [f"{i:032x}" for i in range(4)]
    streamed = sorted((_digest(i), (packs[i % 3], 1000 - i, i)) for i in range(60))  # (the plan's stream: by id)
    for digest, loc in streamed:
        rows.add(digest, loc)
    late = [(_digest(i), (packs[3], i, i)) for i in range(100, 110)]  # (kept after all: out of order)
    for digest, loc in late:
        rows.add(digest, loc)
    assert len(rows._runs) > 1 and rows._runs[0] == [0, 56]  # (the stream one run, written 7 rows at a time)
    expected = dict(streamed + late)
    moved = list(rows.moved({packs[0], packs[2]}))
    assert [loc for _, _, loc in moved] == sorted(loc for loc in expected.values() if loc[0] in (packs[0], packs[2]))
    for n, (row, digest, _) in enumerate(moved):
        rows.move(row, ("f" * 32, n, 1))
        expected[digest] = ("f" * 32, n, 1)
    dropped = [(row, digest) for row, digest, _ in rows.items()][::9]
    for row, digest in dropped:
        rows.drop(row)
        del expected[digest]
    assert len(rows) == len(expected)
    used = rows.used_packs()
    assert set(used) == {loc[0] for loc in expected.values()}  # (packs 0 and 2: every row moved, not named)
    slots = {pack: slot for slot, pack in enumerate(used)}
    assert _decoded(used, list(rows.segment_batches(slots))) == sorted(expected.items())
    assert list(rows.sorted_items()) == sorted(expected.items())
    assert rows.stored_bytes() == sum(length for _, _, length in expected.values())
    rows.close()


def test_entries_come_back_by_key_and_their_moves_are_kept(tmp_path: Path) -> None:
    entries = KeptEntries(tmp_path)
    pack, other = "a" * 32, "b" * 32
    made = {_digest(i): ActionEntry(_digest(-i), i, pack if i % 2 else other, i * 10) for i in range(40)}
    for key in sorted(made)[::-1]:  # (out of order: runs of their own)
        entries.add(key, made[key])
    moved = list(entries.moved({pack}))
    assert [key for _, key, _ in moved] == sorted(key for key, entry in made.items() if entry.pack == pack)
    for n, (row, key, _) in enumerate(moved):
        entries.move(row, "c" * 32, n)
        made[key] = made[key]._replace(pack="c" * 32, offset=n)
    assert list(entries.sorted_items()) == sorted(made.items())


def test_an_id_twice_is_refused(tmp_path: Path) -> None:
    rows = KeptObjects(tmp_path)
    for i in range(20):
        rows.add(_digest(i), ("a" * 32, i, 1))
    rows.add(_digest(3), ("a" * 32, 99, 1))  # (a damaged index's: the plan's merged streams name an id once)
    with pytest.raises(StoreError, match="name an object twice.*run claw fsck"):
        list(rows.segment_batches({"a" * 32: 0}))


@pytest.mark.parametrize("count", [0, 1, 6, 7, 8, 14, 15])
def test_rows_at_the_buffers_boundaries_come_back_whole(tmp_path: Path, count: int) -> None:
    """None, one, and a buffer's worth (7) give or take a row, the first and last dropped and two late ones added: by
    id, the first and last rows of a batch neither lost nor repeated."""
    rows = KeptObjects(tmp_path)
    expected = dict(sorted((_digest(i), ("a" * 32, i, i + 1)) for i in range(count)))
    for digest, loc in expected.items():
        rows.add(digest, loc)
    added = [row for row, _, _ in rows.items()]
    for row in {added[0], added[-1]} if added else ():
        rows.drop(row)
    for digest in {min(expected), max(expected)} if expected else ():
        del expected[digest]
    for late in (b"\xff" * 32, bytes(32)):  # (after every id: its run goes on; before them: a run of its own)
        rows.add(late, ("b" * 32, 0, 9))
        expected[late] = ("b" * 32, 0, 9)
    assert list(rows.sorted_items()) == sorted(expected.items())
    slots = {pack: slot for slot, pack in enumerate(rows.used_packs())}
    assert _decoded(list(slots), list(rows.segment_batches(slots))) == sorted(expected.items())
    assert len(rows) == len(expected) and rows.stored_bytes() == sum(loc[2] for loc in expected.values())
    rows.close()
