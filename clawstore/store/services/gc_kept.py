"""The objects and entries a deleting gc keeps, held as the index segment's own rows (52 bytes an object, 84 an entry),
not as dicts.

A dict of id -> (pack, offset, length) held ~260 bytes a kept object (its id as bytes, a tuple, two ints, a slot): ~100
MB of a real gc's peak at 10,000 x 5, and growing with the store (docs/scale/gc-and-fsck.md, Session 58). The rows are
the segment's format (`index._OBJ`: id, pack slot, offset, length) with slots into this table's own list of packs; the
copy rewrites a moved object's row in place, and the segment takes them sorted by id (`Segment.object_rows`). The kept
entries likewise (`KeptEntries`, `Segment.action_rows`): as a dict of key -> ActionEntry they held ~340 bytes each (~54
MB at 10,000 x 5, Session 59).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING

from clawstore.errors import StoreError
from clawstore.store.core.index import ActionEntry, Loc

if TYPE_CHECKING:
    from numpy import ndarray

_ROW = struct.Struct("<32sIQQ")  # as an index segment's object row (store/core/index.py, _OBJ)
_WHERE = struct.Struct("<IQQ")  # its pack slot, offset and length, after the id
_ACTION = struct.Struct("<32s32sqIQ")  # as an index segment's action row (index._ACT): key, record, time, slot, offset
_NO_RECORD = bytes(32)
_AT_ONCE = 4096  # rows made Python ints at a time (a list of them all: 36 bytes an object)


class _SlottedRows:
    """Rows naming their pack by a slot into the list of packs seen, as an index segment's rows do."""

    def __init__(self) -> None:
        self._rows = bytearray()
        self._packs: list[str] = []
        self._slots: dict[str, int] = {}

    def _slot(self, pack: str) -> int:
        slot = self._slots.get(pack)
        if slot is None:
            slot = self._slots[pack] = len(self._packs)
            self._packs.append(pack)
        return slot

    def _slots_of(self, packs: set[str]) -> list[int]:
        return [self._slots[pack] for pack in packs if pack in self._slots]


class KeptObjects(_SlottedRows):
    """Kept objects as segment rows: `add` each once, `moved` the ones to copy, `move` each copy, `segment_rows`. The
    plan holds its doomed objects in one too (`items`, `drop` the ones kept after all, `sorted_items` to list them)."""

    def __init__(self) -> None:
        super().__init__()
        self._dropped = array("Q")  # rows of objects left out (found damaged while copying)

    def __len__(self) -> int:
        return len(self._rows) // _ROW.size - len(self._dropped)

    def add(self, digest: bytes, loc: Loc) -> None:
        self._rows += _ROW.pack(digest, self._slot(loc[0]), loc[1], loc[2])

    def moved(self, packs: set[str]) -> Iterator[tuple[int, bytes, Loc]]:
        """(row, id, where) of each object in `packs`, in the order of their places (pack id, offset): each pack read
        front to back, as a dict's items sorted by their Loc were."""
        from clawstore.store.core.lean_numpy import np  # (here: a build imports gc's module, never its arrays)

        table = np.frombuffer(self._rows, np.uint8).reshape(-1, _ROW.size)
        slots = table[:, 32:36].copy().view("<u4").ravel()
        rows = np.flatnonzero(np.isin(slots, self._slots_of(packs)))
        # One sort key a row: the pack's place among the pack ids above an offset (< 2**40), ~24 bytes an object
        # at the peak, the same as the sorted list of ids it replaces.
        rank = np.argsort(np.argsort(np.array(self._packs, dtype=object))).astype(np.uint64)
        key = rank[slots[rows]] << np.uint64(40)
        del slots
        key |= table[:, 36:44][rows].copy().view("<u8").ravel()
        del table  # (no view of the rows outlives this: `add` may grow them)
        order = np.argsort(key, kind="stable")
        del key
        order = rows[order]
        del rows
        for at in range(0, len(order), _AT_ONCE):
            for row in order[at:at + _AT_ONCE].tolist():
                digest, slot, offset, length = _ROW.unpack_from(self._rows, row * _ROW.size)
                yield row, digest, (self._packs[slot], offset, length)

    def move(self, row: int, loc: Loc) -> None:
        _WHERE.pack_into(self._rows, row * _ROW.size + 32, self._slot(loc[0]), loc[1], loc[2])

    def items(self) -> Iterator[tuple[int, bytes, Loc]]:
        """(row, id, where) of each object not dropped, in the order added (one may be dropped meanwhile)."""
        dropped = set(self._dropped)
        for row, (digest, slot, offset, length) in enumerate(_ROW.iter_unpack(self._rows)):
            if row not in dropped:
                yield row, digest, (self._packs[slot], offset, length)

    def stored_bytes(self) -> int:
        """The payload lengths of the objects not dropped, summed."""
        dropped = set(self._dropped)
        return sum(length for row, (_, _, _, length) in enumerate(_ROW.iter_unpack(self._rows)) if row not in dropped)

    def sorted_items(self) -> Iterator[tuple[bytes, Loc]]:
        """(id, where) of each object not dropped, by id."""
        packs, rows = self.segment_rows()
        for digest, slot, offset, length in _ROW.iter_unpack(rows):
            yield digest, (packs[slot], offset, length)

    def drop(self, row: int) -> None:
        self._dropped.append(row)

    def segment_rows(self, release: bool = False) -> tuple[list[str], bytes]:
        """`Segment.object_rows`: the packs the rows name (slot by slot) and the rows sorted by id. `release`: the table
        is let go as they are made (empty after: its rows were the plan's last use)."""
        from clawstore.store.core.lean_numpy import np

        table = np.frombuffer(self._rows, np.uint8).reshape(-1, _ROW.size)
        if len(self._dropped):
            table = np.delete(table, np.frombuffer(self._dropped, np.uint64).astype(np.int64), axis=0)
        rows, made = _sorted_by_key(table, "gc's kept objects name an object twice")
        del table
        if release:
            self._rows, self._dropped = bytearray(), array("Q")
        return _used_packs(made, 32, self._packs), rows


class KeptEntries(_SlottedRows):
    """Kept action-cache entries as segment rows: `add` each once, `moved` the ones to copy (by key), `move` each copy,
    `segment_rows`. Slots are into this table's own list of packs (the segment re-slots them)."""

    def __len__(self) -> int:
        return len(self._rows) // _ACTION.size

    def add(self, key: bytes, entry: ActionEntry) -> None:
        self._rows += _ACTION.pack(key, entry.record or _NO_RECORD, entry.time_ns, self._slot(entry.pack), entry.offset)

    def moved(self, packs: set[str]) -> Iterator[tuple[int, bytes, ActionEntry]]:
        """(row, key, entry) of each entry in `packs`, in key order (as the dict's keys sorted were)."""
        from clawstore.store.core.lean_numpy import np

        table = np.frombuffer(self._rows, np.uint8).reshape(-1, _ACTION.size)
        slots = table[:, 72:76].copy().view("<u4").ravel()
        rows = np.flatnonzero(np.isin(slots, self._slots_of(packs)))
        words = table[rows, :32].copy().view(">u8")
        del table, slots
        order = rows[np.lexsort((words[:, 3], words[:, 2], words[:, 1], words[:, 0]))]
        del words, rows
        for at in range(0, len(order), _AT_ONCE):
            for row in order[at:at + _AT_ONCE].tolist():
                key, record, time_ns, slot, offset = _ACTION.unpack_from(self._rows, row * _ACTION.size)
                yield row, key, ActionEntry(None if record == _NO_RECORD else record, time_ns, self._packs[slot],
                                            offset)

    def move(self, row: int, pack: str, offset: int) -> None:
        struct.pack_into("<IQ", self._rows, row * _ACTION.size + 72, self._slot(pack), offset)

    def segment_rows(self, release: bool = False) -> tuple[list[str], bytes]:
        """`Segment.action_rows`: the packs the rows' slots name and the rows sorted by key (`release`: as above)."""
        from clawstore.store.core.lean_numpy import np

        table = np.frombuffer(self._rows, np.uint8).reshape(-1, _ACTION.size)
        rows, made = _sorted_by_key(table, "gc's kept entries name a key twice")
        del table
        if release:
            self._rows = bytearray()
        return _used_packs(made, 72, self._packs), rows


def _sorted_by_key(table: ndarray, twice: str) -> tuple[bytearray, ndarray]:
    """The rows of `table` (a row of bytes each) sorted by their first 32 bytes, which must differ: made straight into
    a new buffer (no sorted copy then copied again into bytes), and an array view of it."""
    from clawstore.store.core.lean_numpy import np

    words = table[:, :32].copy().view(">u8")  # an id as four big-endian words: their order is the bytes' order
    order = np.lexsort((words[:, 3], words[:, 2], words[:, 1], words[:, 0]))
    words = words[order]
    if len(words) > 1 and not (words[1:] != words[:-1]).any(axis=1).all():
        raise StoreError(f"{twice} (the index it planned from is damaged: run claw fsck)")
    del words
    rows = bytearray(table.size)
    made = np.frombuffer(rows, np.uint8).reshape(table.shape)
    np.take(table, order, axis=0, out=made)
    return rows, made


def _used_packs(made: ndarray, slot_at: int, packs: list[str]) -> list[str]:
    """The packs `made`'s rows name, its slots (4 bytes at `slot_at`) re-numbered into that list: a pack whose rows
    all moved (rewritten, then deleted) is not named by the segment."""
    from clawstore.store.core.lean_numpy import np

    used, slots = np.unique(made[:, slot_at:slot_at + 4].copy().view("<u4").ravel(), return_inverse=True)
    made[:, slot_at:slot_at + 4] = slots.astype("<u4").reshape(-1, 1).view(np.uint8)
    return [packs[slot] for slot in used.tolist()]
