"""The objects and entries a deleting gc keeps or deletes, as the index segment's own rows (52 bytes an object, 84 an
entry) in an unnamed temporary file, a bounded number of them in memory at a time.

A dict of id -> (pack, offset, length) held ~260 bytes a kept object, then rows in memory 52 (sessions 58-59): ~38 MB
of a real gc's peak at 10,000 x 5 with a model dropped, growing with the store (docs/scale/gc-and-fsck.md, Session 60).
The plan streams the index in id order (and its entries in key order), so the rows are written sorted; the few added
later (kept after all: reached by a late ref, or in a pack touched meanwhile) form runs of their own, merged when the
rows are read in order. A moved or dropped row is rewritten in place in the file. What is held: SPILL_ROWS rows before
they are written, a batch of each run while they are read in order, and COPY_ROWS rows of the packs a copy takes up
(`KeptObjects.moved`). Where the disk will not take the file (_REFUSED), the rows are held in memory instead.
"""

from __future__ import annotations

import errno
import heapq
import os
import struct
import tempfile
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from clawstore.errors import StoreError
from clawstore.store.core.index import ActionEntry, Loc

if TYPE_CHECKING:
    from numpy import ndarray

_ROW = struct.Struct("<32sIQQ")  # as an index segment's object row (store/core/index.py, _OBJ)
_WHERE = struct.Struct("<IQQ")  # its pack slot, offset and length, after the id
_ACTION = struct.Struct("<32s32sqIQ")  # as an index segment's action row (index._ACT): key, record, time, slot, offset
_SLOT = struct.Struct("<I")
_NO_RECORD = bytes(32)
_DROPPED = 0xFFFFFFFF  # the pack slot of a row left out (a doomed object kept after all, a kept one found damaged)
# Rows gathered in memory before they are written to the file (0.9 MB of objects, 1.4 MB of entries), and read from it
# at a time (a batch of each run while runs are merged).
SPILL_ROWS = 16384
# Rows of moved objects a copy takes in pack order at once (whole packs, at least one: ~70 bytes each, 4.5 MB): the
# rows of the rewritten packs are gathered from the file a group of packs at a time, each group one read of it.
COPY_ROWS = 65536
_AT_ONCE = 4096  # rows made Python objects at a time
# A store's disk that will not take the file (full, over quota, read-only, not ours to write): the rows are then held in
# memory, as before session 60. A dry run must still say what a gc would free, and a full disk is when gc is run.
_REFUSED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


class _SpilledRows:
    """Fixed-size rows (a 32-byte key first, a pack slot at `slot_at` into this table's own list of packs) written to
    an unnamed temporary file SPILL_ROWS at a time, each write sorted by key: a write whose first key follows the last
    one's continues its run, another begins a run of its own."""

    def __init__(self, tmp_dir: Path, stride: int, slot_at: int):
        self._tmp_dir, self._stride, self._slot_at = tmp_dir, stride, slot_at
        self._file: BinaryIO | None = None
        self._fd: int | None = None  # (made with the first write: a dry run's plan that holds nothing makes none)
        self._memory: bytearray | None = None  # the file's rows, once the disk refused it (_REFUSED)
        self.refused: str | None = None  # why it did (the system's words), for the user: gc then holds more
        self._buffer = bytearray()
        self._pending: list[tuple[int, int, bytes]] = []  # (row, byte in it, bytes) to rewrite in the file
        self._written = 0  # rows in the file
        self._runs: list[list[int]] = []  # [first row, rows] of each sorted run
        self._last = b""  # the key of the file's last row
        self._dropped = 0
        self._packs: list[str] = []
        self._slots: dict[str, int] = {}

    def __len__(self) -> int:
        return self._written + len(self._buffer) // self._stride - self._dropped

    def close(self) -> None:
        self._close_file()
        self._buffer, self._memory = bytearray(), None

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file, self._fd = None, None

    def _slot(self, pack: str) -> int:
        slot = self._slots.get(pack)
        if slot is None:
            slot = self._slots[pack] = len(self._packs)
            self._packs.append(pack)
        return slot

    def _slots_of(self, packs: set[str]) -> list[int]:
        return [self._slots[pack] for pack in packs if pack in self._slots]

    def _add(self, row: bytes) -> None:
        self._buffer += row
        if len(self._buffer) >= SPILL_ROWS * self._stride:
            self._flush()

    def _flush(self) -> None:
        """The buffered rows into the file, sorted (rows come sorted from the plan's streams: then not sorted again)."""
        stride, buffer = self._stride, self._buffer
        if not buffer:
            return
        self._buffer = bytearray()
        data = bytes(buffer) if _in_order(buffer, stride) else b"".join(sorted(
            buffer[at:at + stride] for at in range(0, len(buffer), stride)))  # (a row's key first: rows sort by it)
        del buffer
        self._put(data, self._written * stride)
        n = len(data) // stride
        if self._runs and data[:32] > self._last:
            self._runs[-1][1] += n
        else:
            self._runs.append([self._written, n])
        self._written += n
        self._last = data[-stride:-stride + 32]

    def _put(self, data: bytes | bytearray, at: int) -> None:
        """`data` written at byte `at` of the file (its end, or rows in it), or of the rows in memory once the disk
        refused the file."""
        if self._memory is None:
            try:
                if self._fd is None:  # (unnamed where the system allows: a killed gc leaves no file)
                    self._file = tempfile.TemporaryFile(dir=self._tmp_dir)
                    self._fd = self._file.fileno()
                _write_all(self._fd, data, at)
                return
            except OSError as exc:
                if exc.errno not in _REFUSED:  # (the disk failing: gc stops, having deleted nothing yet)
                    raise StoreError(f"gc's plan could not be written to a temporary file in {self._tmp_dir}: "
                                     f"{exc.strerror or exc}") from exc
                rows = bytearray(self._read(0, self._written))  # (the rows the file holds: reading takes no room)
                self.refused = exc.strerror or str(exc)
                self._close_file()
                self._memory = rows
        self._memory[at:at + len(data)] = data

    def _read(self, first: int, n: int) -> bytes:
        if self._memory is not None:
            return bytes(self._memory[first * self._stride:(first + n) * self._stride])
        if not n:
            return b""
        assert self._fd is not None
        return _read_all(self._fd, first * self._stride, n * self._stride)

    def _file_batches(self, first: int = 0, end: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(first row, rows) of the file's rows from `first`, SPILL_ROWS at a time (with the rewrites gathered)."""
        self._flush()
        self._apply()
        end = self._written if end is None else end
        for at in range(first, end, SPILL_ROWS):
            yield at, self._read(at, min(SPILL_ROWS, end - at))

    def _rewrite(self, row: int, at: int, data: bytes) -> None:
        """Bytes `at` of row `row` of the file made `data`: gathered (SPILL_ROWS at most) and written a span of rows at
        a time (a write an object copied cost 1.5 s of system time at 10,000 x 5)."""
        assert row < self._written
        self._pending.append((row, at, data))
        if len(self._pending) >= SPILL_ROWS:
            self._apply()

    def _apply(self) -> None:
        """The rewrites gathered, into the file: each span of at most SPILL_ROWS rows that holds some read, patched and
        written back."""
        if not self._pending:
            return
        pending, self._pending = sorted(self._pending, key=itemgetter(0)), []  # (stable: a row's later rewrite last)
        stride, i = self._stride, 0
        while i < len(pending):
            first = pending[i][0]
            j = i
            while j < len(pending) and pending[j][0] < first + SPILL_ROWS:
                j += 1
            rows = bytearray(self._read(first, pending[j - 1][0] + 1 - first))
            for row, at, data in pending[i:j]:
                start = (row - first) * stride + at
                rows[start:start + len(data)] = data
            self._put(rows, first * stride)
            i = j

    def _drop(self, row: int) -> None:
        self._rewrite(row, self._slot_at, _SLOT.pack(_DROPPED))
        self._dropped += 1

    def _live(self, rows: bytes) -> list[tuple[int, bytes]]:
        """(index in `rows`, row) of each row of a batch not dropped."""
        stride, slot_at = self._stride, self._slot_at
        return [(i, rows[at:at + stride]) for i, at in enumerate(range(0, len(rows), stride))
                if rows[at + slot_at:at + slot_at + 4] != b"\xff\xff\xff\xff"]

    def _sorted(self) -> Iterator[tuple[list[int], bytes]]:
        """(file rows, rows) of every row not dropped, by key, SPILL_ROWS or so at a time: one run's batches as they
        lie, several runs merged (a row at a time: only rows kept after all begin runs of their own); a key twice is
        refused."""
        self._flush()  # (its runs as they stand)
        last = b""
        for positions, rows in self._merged() if len(self._runs) > 1 else self._one_run():
            if len(positions) and _repeats(rows, self._stride, last):
                raise StoreError(f"{self._twice} (the index it planned from is damaged: run claw fsck)")
            if len(positions):
                last = rows[-self._stride:len(rows) - self._stride + 32]
                yield positions, rows

    def _one_run(self) -> Iterator[tuple[list[int], bytes]]:
        from clawstore.store.core.lean_numpy import np

        for first, rows in self._file_batches():
            live = np.flatnonzero(self._slot_column(rows) < len(self._packs))
            if len(live) == len(rows) // self._stride:
                yield list(range(first, first + len(live))), rows
            else:
                table = np.frombuffer(rows, np.uint8).reshape(-1, self._stride)
                yield (live + first).tolist(), table[live].tobytes()

    def _merged(self) -> Iterator[tuple[list[int], bytes]]:
        def run(first: int, n: int) -> Iterator[tuple[bytes, int, bytes]]:
            for at, rows in self._file_batches(first, first + n):
                for i, row in self._live(rows):
                    yield row[:32], at + i, row

        positions: list[int] = []
        batch: list[bytes] = []
        for _, row, data in heapq.merge(*(run(first, n) for first, n in self._runs)):
            positions.append(row)
            batch.append(data)
            if len(batch) == SPILL_ROWS:
                yield positions, b"".join(batch)
                positions, batch = [], []
        yield positions, b"".join(batch)

    _twice = "gc's rows name a key twice"

    def used_packs(self) -> list[str]:
        """The packs the rows not dropped name, in the order of their slots: a pack whose rows all moved (rewritten,
        then deleted) is not named by the segment."""
        from clawstore.store.core.lean_numpy import np

        used = np.zeros(len(self._packs) + 1, bool)
        for _, rows in self._file_batches():
            used[self._slot_column(rows)] = True  # (a dropped row's slot: the last)
        return [self._packs[slot] for slot in np.flatnonzero(used[:-1]).tolist()]

    def _slot_column(self, rows: bytes | bytearray) -> ndarray:
        from clawstore.store.core.lean_numpy import np

        table = np.frombuffer(rows, np.uint8).reshape(-1, self._stride)
        slots = table[:, self._slot_at:self._slot_at + 4].copy().view("<u4").ravel()
        return np.minimum(slots, np.uint32(len(self._packs)))  # (a dropped row: len(packs))

    def segment_batches(self, slots: dict[str, int]) -> Iterator[bytes]:
        """The rows not dropped, sorted by key, SPILL_ROWS at a time, each pack slot made the segment's (`slots`)."""
        from clawstore.store.core.lean_numpy import np

        remap = np.array([slots.get(pack, _DROPPED) for pack in self._packs] + [_DROPPED], dtype="<u4")
        for _, rows in self._sorted():
            made = bytearray(rows)
            table = np.frombuffer(made, np.uint8).reshape(-1, self._stride)
            table[:, self._slot_at:self._slot_at + 4] = remap[self._slot_column(made)].view(np.uint8).reshape(-1, 4)
            del table
            yield bytes(made)


class KeptObjects(_SpilledRows):
    """Kept objects as segment rows: `add` each once, `moved` the ones to copy, `move` each copy, `segment_batches`.
    The plan holds its doomed objects in one too (`items`, `drop` the ones kept after all, `sorted_items` to list
    them)."""

    _twice = "gc's kept objects name an object twice"

    def __init__(self, tmp_dir: Path):
        super().__init__(tmp_dir, _ROW.size, 32)

    def add(self, digest: bytes, loc: Loc) -> None:
        self._add(_ROW.pack(digest, self._slot(loc[0]), loc[1], loc[2]))

    def moved(self, packs: set[str]) -> Iterator[tuple[int, bytes, Loc]]:
        """(row, id, where) of each object in `packs`, in the order of their places (pack id, offset): each pack read
        front to back, as a dict's items sorted by their Loc were. The packs are taken up a group at a time in the order
        of their ids, a group's rows (COPY_ROWS, or one pack's) gathered by one read of the file."""
        from clawstore.store.core.lean_numpy import np

        counts = np.zeros(len(self._packs) + 1, np.int64)
        for _, rows in self._file_batches():
            counts += np.bincount(self._slot_column(rows).astype(np.int64), minlength=len(counts))
        groups: list[list[int]] = [[]]
        held = 0
        for pack in sorted(packs):
            slot = self._slots.get(pack)
            if slot is None or not counts[slot]:
                continue
            if groups[-1] and held + counts[slot] > COPY_ROWS:
                groups.append([])
                held = 0
            groups[-1].append(slot)
            held += int(counts[slot])
        del counts
        place = np.zeros(len(self._packs) + 1, np.uint64)  # (a slot's pack's place among the pack ids)
        place[sorted(range(len(self._packs)), key=self._packs.__getitem__)] = np.arange(len(self._packs))
        for group in groups:
            if group:
                yield from self._group(np.array(group, np.uint32), place)

    def _group(self, wanted: ndarray, place: ndarray) -> Iterator[tuple[int, bytes, Loc]]:
        """The rows of the packs of the slots `wanted`, by (pack, offset): gathered by one read of the file, sorted by
        one key a row (the pack's place above its offset, < 2**40)."""
        from clawstore.store.core.lean_numpy import np

        found: list[ndarray] = []
        tables: list[ndarray] = []
        for first, rows in self._file_batches():
            hit = np.flatnonzero(np.isin(self._slot_column(rows), wanted))
            if len(hit):
                found.append(hit + first)
                tables.append(np.frombuffer(rows, np.uint8).reshape(-1, _ROW.size)[hit])
        if not tables:
            return
        positions, table = np.concatenate(found), np.concatenate(tables)
        del found, tables
        key = place[table[:, 32:36].copy().view("<u4").ravel()] << np.uint64(40)
        key |= table[:, 36:44].copy().view("<u8").ravel()
        order = np.argsort(key, kind="stable")
        del key
        table, positions = table[order], positions[order]
        del order
        for at in range(0, len(positions), _AT_ONCE):
            data = table[at:at + _AT_ONCE].tobytes()
            for i, row in enumerate(positions[at:at + _AT_ONCE].tolist()):
                digest, slot, offset, length = _ROW.unpack_from(data, i * _ROW.size)
                yield row, digest, (self._packs[slot], offset, length)

    def move(self, row: int, loc: Loc) -> None:
        self._rewrite(row, 32, _WHERE.pack(self._slot(loc[0]), loc[1], loc[2]))

    def items(self) -> Iterator[tuple[int, bytes, Loc]]:
        """(row, id, where) of each object not dropped, in the order added (one may be dropped meanwhile)."""
        for first, rows in self._file_batches():
            for i, row in self._live(rows):
                digest, slot, offset, length = _ROW.unpack(row)
                yield first + i, digest, (self._packs[slot], offset, length)

    def stored_bytes(self) -> int:
        """The payload lengths of the objects not dropped, summed."""
        from clawstore.store.core.lean_numpy import np

        total = 0
        for _, rows in self._file_batches():
            table = np.frombuffer(rows, np.uint8).reshape(-1, _ROW.size)
            live = self._slot_column(rows) < len(self._packs)
            total += int(table[live, 44:52].copy().view("<u8").sum(dtype=np.uint64))
        return total

    def sorted_items(self) -> Iterator[tuple[bytes, Loc]]:
        """(id, where) of each object not dropped, by id."""
        for _, rows in self._sorted():
            for digest, slot, offset, length in _ROW.iter_unpack(rows):
                yield digest, (self._packs[slot], offset, length)

    def drop(self, row: int) -> None:
        self._drop(row)


class KeptEntries(_SpilledRows):
    """Action-cache entries as segment rows: `add` each once, `moved` the ones to copy (by key), `move` each copy,
    `segment_batches`. The plan holds its doomed entries in one too (`items`, `drop`, `sorted_items`)."""

    _twice = "gc's kept entries name a key twice"

    def __init__(self, tmp_dir: Path):
        super().__init__(tmp_dir, _ACTION.size, 72)

    def add(self, key: bytes, entry: ActionEntry) -> None:
        self._add(_ACTION.pack(key, entry.record or _NO_RECORD, entry.time_ns, self._slot(entry.pack), entry.offset))

    def _entry(self, row: bytes) -> tuple[bytes, ActionEntry]:
        key, record, time_ns, slot, offset = _ACTION.unpack(row)
        return key, ActionEntry(None if record == _NO_RECORD else record, time_ns, self._packs[slot], offset)

    def moved(self, packs: set[str]) -> Iterator[tuple[int, bytes, ActionEntry]]:
        """(row, key, entry) of each entry in `packs`, in key order (as the dict's keys sorted were)."""
        from clawstore.store.core.lean_numpy import np

        wanted = np.array(self._slots_of(packs), np.uint32)
        for positions, rows in self._sorted():
            for i in np.flatnonzero(np.isin(self._slot_column(rows), wanted)).tolist():
                yield (positions[i], *self._entry(rows[i * _ACTION.size:(i + 1) * _ACTION.size]))

    def move(self, row: int, pack: str, offset: int) -> None:
        self._rewrite(row, 72, struct.pack("<IQ", self._slot(pack), offset))

    def items(self) -> Iterator[tuple[int, bytes, ActionEntry]]:
        """(row, key, entry) of each entry not dropped, in the order added."""
        for first, rows in self._file_batches():
            for i, row in self._live(rows):
                yield (first + i, *self._entry(row))

    def sorted_items(self) -> Iterator[tuple[bytes, ActionEntry]]:
        for _, rows in self._sorted():
            for at in range(0, len(rows), _ACTION.size):
                yield self._entry(rows[at:at + _ACTION.size])

    def drop(self, row: int) -> None:
        self._drop(row)


def _in_order(rows: bytes | bytearray, stride: int) -> bool:
    """Whether rows of `stride` bytes are in order by their first 32 bytes (compared as four big-endian words)."""
    from clawstore.store.core.lean_numpy import np

    words = np.frombuffer(rows, np.uint8).reshape(-1, stride)[:, :32].copy().view(">u8")
    before, after = words[:-1], words[1:]
    differs = before != after
    first = np.where(differs.any(axis=1), differs.argmax(axis=1), 3)  # (the first word two rows differ in)
    at = np.arange(len(first))
    return bool((before[at, first] <= after[at, first]).all())


def _repeats(rows: bytes, stride: int, last: bytes) -> bool:
    """Whether a key of these rows (in order) is the one before it, or the first is `last`."""
    from clawstore.store.core.lean_numpy import np

    if rows[:32] == last:
        return True
    keys = np.frombuffer(rows, np.uint8).reshape(-1, stride)[:, :32]
    return bool((keys[1:] == keys[:-1]).all(axis=1).any())


def _write_all(fd: int, data: bytes | bytearray, at: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done


def _read_all(fd: int, at: int, n: int) -> bytes:
    data = os.pread(fd, n, at)
    if len(data) != n:
        raise StoreError("gc's temporary file of its plan was cut short")
    return data
