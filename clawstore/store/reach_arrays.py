"""Reach's cached walk by arrays: the index's held object rows and a pack's edges file as numpy arrays, so that a pack's
objects are matched to their index rows, the ids they name looked up and their closure marked a frontier at a time
(bulk arithmetic in C) instead of a Python step an object. Imported only by that walk (numpy costs ~40 ms to import).

What it answers is what `HeldObjects.row_of` answers, a row's first table first; anything it cannot answer exactly
(a small segment's object, an id the index lacks, two ids sharing their first 8 bytes) it leaves to the caller's
look-up an object at a time. docs/gc-and-archives.md (Details by module, store/reach.py).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawstore.store.core.index import NO_RECORD, ActionEntry, HeldObjects, Loc, Table
from clawstore.store.core.lean_numpy import np

if TYPE_CHECKING:
    from clawstore.store.core.edgefile import PackEdges

_ID = 32
_OBJ = struct.Struct("<32sIQQ")  # an index table's object row (index._OBJ)
_ACT = struct.Struct("<32s32sqIQ")  # and an action row (index._ACT)
# An object row of an index table (index._OBJ, 52 bytes): its digest, its first 8 bytes as a sort key, slot, offset
_ROW = np.dtype({"names": ["digest", "key", "slot", "offset", "length"], "formats": ["S32", ">u8", "<u4", "<u8", "<u8"],
                 "offsets": [0, 0, 32, 36, 44], "itemsize": 52})
NOT_FOUND = -1  # no held row: the caller looks it up (the index may lack it)
SMALL = -2  # a small segment's object (row_of's row -1), or an id whose key another shares: looked up by the caller


def search(sorted_values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of `wanted` is or would be in `sorted_values` (np.searchsorted), the queries taken in sorted order:
    each search then starts where the last ended, in memory the last touched (2-3x faster on a table of 445,000)."""
    if len(wanted) < 64 or not (wanted[1:] < wanted[:-1]).any():  # (a table's own keys come sorted: not sorted again)
        return np.searchsorted(sorted_values, wanted)
    order = np.argsort(wanted)
    found = np.empty(len(wanted), np.int64)
    found[order] = np.searchsorted(sorted_values, wanted[order])
    return found


def keys_of(digests: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each 32-byte id (an `S32` array) as a native uint64: ids sort as their keys do."""
    return np.ascontiguousarray(digests).view(">u8").reshape(-1, 4)[:, 0].astype(np.uint64)


def _in_order_once(view: np.ndarray, keys: np.ndarray) -> bool:
    """Whether a table's rows (as _ROW, with their keys) are in order, no id twice."""
    if (keys[1:] < keys[:-1]).any():
        return False
    tied = np.flatnonzero(keys[1:] == keys[:-1])  # (few: ids sharing their first 8 bytes, or one id twice)
    return not bool((view["digest"][tied] == view["digest"][tied + 1]).any())


class HeldArrays:
    """The held tables of a HeldObjects as arrays (views of its bytes, plus 8 bytes a row of sort keys): a bulk
    `lookup` and each pack's rows (`pack_rows`). Only for a finder that holds every table (`usable`)."""

    def __init__(self, finder: HeldObjects):
        self.finder = finder
        self.packs: list[str] = []
        number: dict[str, int] = {}
        # (rows as _ROW, their keys, first row, pack number of each slot, slots the table has)
        self._tables: list[tuple[np.ndarray, np.ndarray, int, np.ndarray]] = []
        self._bytes: list[bytes] = []
        for rows, _, _, table, first in finder._held:
            view = np.frombuffer(rows, dtype=_ROW)
            self._bytes.append(rows)
            slots = np.array([number.setdefault(name, len(number)) for name in table.packs], dtype=np.int64)
            self._tables.append((view, view["key"].astype(np.uint64), first, slots))
        self.packs = list(number)
        self.number = number
        # Rows out of order (a damaged table) would make `searchsorted` miss objects that are there, and a row twice
        # be marked at its second row (matched from its pack's file) while a look-up answers with the first: such an
        # index is walked by rows (whose look-ups refuse it, or find what it holds, a row of an id always its first)
        self.in_order = all(_in_order_once(view, keys) for view, keys, _, _ in self._tables)
        small = list(finder._objects)
        self._small = set(small)
        self._small_keys = np.sort(keys_of(np.array(small, dtype="S32"))) if small else np.zeros(0, np.uint64)
        # A row's first row (row_of's answer) when an earlier table, or a small segment, has its digest too
        self._first: list[np.ndarray | None] = []
        for i, (view, keys, _, _) in enumerate(self._tables):
            earlier = self._search(view["digest"], keys, self._tables[:i]) if i else None
            if self._small:
                hit = self._is_small_key(keys)
                rows = self._bytes[i]
                for at in np.flatnonzero(hit):  # (few: a small segment's objects)
                    if rows[at * 52:at * 52 + _ID] in self._small:
                        earlier = np.full(len(view), NOT_FOUND, np.int64) if earlier is None else earlier
                        earlier[at] = SMALL
            self._first.append(earlier if earlier is not None and (earlier != NOT_FOUND).any() else None)

    def _is_small_key(self, keys: np.ndarray) -> np.ndarray:
        """Whether each key is a small segment's object's (its whole id is compared by the caller)."""
        small = self._small_keys
        at = search(small, keys)
        at[at == len(small)] = 0
        return small[at] == keys

    @staticmethod
    def usable(finder: HeldObjects) -> bool:
        return not finder._rest

    def _search(self, digests: np.ndarray, keys: np.ndarray,
                tables: list[tuple[np.ndarray, np.ndarray, int, np.ndarray]]) -> np.ndarray:
        """The first row (as row_of numbers them) of each id in `tables`, NOT_FOUND, or SMALL if its key matched a
        row of another id (left to row_of)."""
        found = np.full(len(digests), NOT_FOUND, np.int64)
        todo = np.arange(len(digests))
        for view, table_keys, first, _ in tables:
            if not len(todo) or not len(table_keys):
                continue
            wanted = keys[todo]
            at = search(table_keys, wanted)
            inside = at < len(table_keys)
            match = np.zeros(len(todo), bool)
            match[inside] = table_keys[at[inside]] == wanted[inside]
            same = np.zeros(len(todo), bool)
            same[match] = view["digest"][at[match]] == digests[todo[match]]
            found[todo[same]] = first + at[same]
            found[todo[match & ~same]] = SMALL  # (ids sharing 8 bytes: row_of compares the whole id)
            todo = todo[~match]
        return found

    def lookup(self, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, pack number) of each id (`S32`): row_of's row, NOT_FOUND (the held tables lack it) or SMALL."""
        keys = keys_of(digests)
        rows = self._search(digests, keys, self._tables)
        if self._small:
            for at in np.flatnonzero(self._is_small_key(keys)):
                if digests[at:at + 1].tobytes() in self._small:  # (np.bytes_ drops trailing zero bytes)
                    rows[at] = SMALL
        packs = np.full(len(rows), -1, np.int64)
        for view, _, first, slots in self._tables:
            mine = (rows >= first) & (rows < first + len(view))
            if mine.any():
                slot = view["slot"][rows[mine] - first].astype(np.int64)
                if (slot >= len(slots)).any():  # (a damaged table: row_of names it)
                    rows[np.flatnonzero(mine)[slot >= len(slots)]] = SMALL
                    slot = np.minimum(slot, len(slots) - 1)
                packs[mine] = slots[slot] if len(slots) else -1
        return rows, packs

    def pack_rows(self, pack: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The held rows of `pack`: (the row row_of finds for each, its offset in the pack, its digest), those row_of
        would answer otherwise (a small segment's object) left out."""
        number = self.number.get(pack)
        found_rows, found_offsets, found_digests = [], [], []
        for i, (view, _, first, slots) in enumerate(self._tables):
            wanted = np.flatnonzero(slots == number) if number is not None else ()
            if not len(wanted):
                continue
            slot = view["slot"]
            at = np.flatnonzero(slot == wanted[0] if len(wanted) == 1 else np.isin(slot, wanted))
            rows = first + at
            earlier = self._first[i]
            if earlier is not None:
                before = earlier[at]
                rows = np.where(before >= 0, before, rows)
                keep = before != SMALL
                at, rows = at[keep], rows[keep]
            found_rows.append(rows)
            found_offsets.append(view["offset"][at])
            found_digests.append(view["digest"][at])
        if not found_rows:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, "S32")
        return np.concatenate(found_rows), np.concatenate(found_offsets), np.concatenate(found_digests)


@dataclass
class Tally:
    """The index's big tables' objects as a plan that does not hold them needs them: how many, the reached ones' stored
    bytes and count per pack, and the others (digest, where), in no particular order."""

    objects: int
    reached: dict[str, tuple[int, int]]  # pack -> (objects, stored bytes)
    unreached_count: int
    unreached: Iterator[tuple[bytes, Loc]]  # (made as it is read: a gc deleting most of a store holds its plan too)


TALLY_ROWS = 65536  # a table's rows tallied at once: ~30 bytes each in arrays (7 MB at 473,000 rows, before: 27 MB)


def tally(held: HeldArrays, marks: bytearray, others: set[bytes]) -> Tally | None:
    """Tally the held tables by their marks (a byte a row; an object marked by digest in `others` too); None if an
    object is in two rows (the plan then merges them as it streams) or a row names a slot its table lacks."""
    if any(first is not None for first in held._first):
        return None  # (an object in two tables, or a table's and a small segment's)
    marked = np.frombuffer(marks, dtype=np.uint8)
    wanted = np.sort(keys_of(np.array(list(others), dtype="S32"))) if others else None
    count, per_pack = 0, np.zeros(len(held.packs), np.int64)
    stored = np.zeros(len(held.packs), np.int64)
    unreached: list[np.ndarray] = []  # per table, its rows not reached
    for (view, keys, first, slots), rows in zip(held._tables, held._bytes, strict=True):
        n = len(view)
        if n > 1 and ((keys[1:] == keys[:-1]) & (view["digest"][1:] == view["digest"][:-1])).any():
            return None  # (twice in one table)
        if n and view["slot"].max() >= len(slots):
            return None
        not_reached = []
        for lo in range(0, n, TALLY_ROWS):  # (its arrays a part of the table at a time)
            hi = min(n, lo + TALLY_ROWS)
            pack = slots[view["slot"][lo:hi].astype(np.int64)]
            reached = marked[first + lo:first + hi] == 1
            if wanted is not None and len(wanted):
                part = keys[lo:hi]
                at = search(wanted, part)
                at[at == len(wanted)] = 0
                for row in np.flatnonzero((wanted[at] == part) & ~reached).tolist():  # (whole ids compared)
                    reached[row] = rows[(lo + row) * 52:(lo + row) * 52 + _ID] in others
            per_pack += np.bincount(pack[reached], minlength=len(held.packs))
            stored += np.bincount(pack[reached], weights=view["length"][lo:hi][reached],
                                  minlength=len(held.packs)).astype(np.int64)  # (exact: sums below 2**53)
            not_reached.append(np.flatnonzero(~reached).astype(np.uint32) + np.uint32(lo))
        count += n
        unreached.append(np.concatenate(not_reached) if not_reached else np.zeros(0, np.uint32))
    return Tally(count, {held.packs[i]: (int(per_pack[i]), int(stored[i])) for i in np.flatnonzero(per_pack)},
                 sum(len(rows) for rows in unreached), _unreached_objects(held, unreached))


def _unreached_objects(held: HeldArrays, unreached: list[np.ndarray]) -> Iterator[tuple[bytes, Loc]]:
    for (_, _, _, slots), rows, table_rows in zip(held._tables, held._bytes, unreached, strict=True):
        for row in table_rows.tolist():
            _, slot_at, offset, length = _OBJ.unpack_from(rows, row * 52)
            yield rows[row * 52:row * 52 + _ID], (held.packs[int(slots[slot_at])], offset, length)


# An index table's action row (index._ACT, 84 bytes): key, record (NO_RECORD: removed), time, slot, offset
_ACTION = np.dtype({"names": ["key", "sort", "record", "time", "slot", "offset"],
                    "formats": ["S32", ">u8", "S32", "<i8", "<u4", "<u8"], "offsets": [0, 0, 32, 64, 72, 76],
                    "itemsize": 84})
_ACTION_ROWS = 16384  # action rows read and judged at once (1.4 MB)


@dataclass
class ActionTally:
    """The index's action entries as a plan that does not hold them needs them: the entries whose record is reached,
    counted per pack; the others (key, entry), removed ones left out."""

    reached: dict[str, int]  # pack -> entries
    unreached: Iterator[tuple[bytes, ActionEntry]]  # (made as it is read, the rows read again)


def tally_actions(tables: list[Table], small: list[bytes], reached: Callable[[np.ndarray], np.ndarray]
                  ) -> ActionTally | None:
    """Tally the tables' action rows, `reached` answering for an `S32` array of records; None if a key is in two rows
    (tables, or a table and the small segments' keys `small`: the newest entry of a key is then chosen by the merged
    stream)."""
    keys = [keys_of(np.array(small, dtype="S32"))] if small else []
    for table in tables:
        for first in range(0, table._head.n_actions, _ACTION_ROWS):
            keys.append(np.frombuffer(_action_rows(table, first), dtype=_ACTION)["sort"].astype(np.uint64))
    every = np.sort(np.concatenate(keys)) if keys else np.zeros(0, np.uint64)  # (np.unique hashes: 100x slower)
    if (every[1:] == every[:-1]).any():
        return None  # (a key in two rows, or two keys sharing 8 bytes)
    del keys, every
    counts: dict[str, int] = {}
    unreached: list[tuple[Table, int, np.ndarray]] = []  # (table, first row of a batch, its rows not reached)
    for table in tables:
        head, packs = table._head, table.packs
        for first in range(0, head.n_actions, _ACTION_ROWS):
            rows = _action_rows(table, first)
            n = len(rows) // _ACT.size
            view = np.frombuffer(rows, dtype=_ACTION)
            slot = view["slot"].astype(np.int64)
            if n and slot.max() >= len(packs):
                return None  # (a damaged table: the stream names it)
            live = view["record"] != NO_RECORD  # (a removed entry, left out)
            answers = np.zeros(n, bool)
            answers[live] = reached(view["record"][live])
            for number, count in enumerate(np.bincount(slot[answers], minlength=len(packs)).tolist()):
                if count:
                    counts[packs[number]] = counts.get(packs[number], 0) + count
            if not answers[live].all():
                unreached.append((table, first, np.flatnonzero(live & ~answers)))
    return ActionTally(counts, _unreached_entries(unreached))


def _action_rows(table: Table, first: int) -> bytes:
    """The table's action rows from `first`, _ACTION_ROWS of them at most."""
    head = table._head
    n = min(_ACTION_ROWS, head.n_actions - first)
    return table._read(head.actions_at + first * _ACT.size, head.actions_at + (first + n) * _ACT.size)


def _unreached_entries(unreached: list[tuple[Table, int, np.ndarray]]) -> Iterator[tuple[bytes, ActionEntry]]:
    for table, first, batch_rows in unreached:
        rows = _action_rows(table, first)
        for row in batch_rows.tolist():
            key, record, time_ns, slot_at, offset = _ACT.unpack_from(rows, row * _ACT.size)
            yield key, ActionEntry(record, time_ns, table.packs[slot_at], offset)


class PackArrays:
    """A pack's edges file as arrays, each of its rows matched to the index row row_of finds for it (-1: none, or
    one row_of answers otherwise: such a row is looked up by the caller)."""

    def __init__(self, found: PackEdges, held: HeldArrays, seen: np.ndarray):
        self.found, self.pack = found, found.pack
        self.rows = rows = len(found.offsets)
        self.known = np.frombuffer(found.known, dtype="S32")
        self.covers = np.frombuffer(found.covers, dtype=np.uint8).astype(bool) if rows else np.zeros(0, bool)
        self.starts = np.frombuffer(found.starts, dtype=np.uint32).astype(np.int64)
        self.tokens = np.frombuffer(found.tokens, dtype=np.uint32) if len(found.tokens) else np.zeros(0, np.uint32)
        self.seen = seen  # a byte a row, then an other id: 1 once walked (or stacked) from this pack
        offsets = np.frombuffer(found.offsets, dtype=np.uint64) if rows else np.zeros(0, np.uint64)
        index_rows, index_offsets, digests = held.pack_rows(found.pack)
        at = search(offsets, index_offsets)
        inside = at < rows
        same = np.zeros(len(at), bool)
        same[inside] = offsets[at[inside]] == index_offsets[inside]
        same[same] = self.known[at[same]] == digests[same]
        self.index_row = np.full(rows, -1, np.int64)
        self.index_row[at[same]] = index_rows[same]
        # index row -> file row, for the rows waiting for this pack (sorted by index row)
        order = np.argsort(self.index_row)
        self._by_index = (self.index_row[order], order)
        # A blob the pack holds twice (a batch's object written again): the index names one copy, the file's ids name
        # the last (edgefile.EdgeLog.against); a row the index does not name stands for the row it names of that id
        # (row_of's answer: the walk by rows looks it up and walks that row)
        self.alias = np.arange(rows, dtype=np.int64)
        unnamed = np.flatnonzero(self.index_row < 0)
        if len(unnamed) and len(digests):  # (by their keys, then the whole ids compared)
            keys = keys_of(digests)
            by_key = np.argsort(keys)
            sorted_keys = keys[by_key]
            wanted = self.known[unnamed]
            at = search(sorted_keys, keys_of(wanted))
            at[at == len(sorted_keys)] = 0
            hit = digests[by_key[at]] == wanted
            named = self.file_rows(index_rows[by_key[at[hit]]])
            self.alias[unnamed[hit][named >= 0]] = named[named >= 0]

    def file_rows(self, index_rows: np.ndarray) -> np.ndarray:
        """Each index row's row in this file, -1 if the file has none matched to it."""
        sorted_rows, order = self._by_index
        at = search(sorted_rows, index_rows)
        inside = at < len(sorted_rows)
        hit = np.zeros(len(index_rows), bool)
        hit[inside] = sorted_rows[at[inside]] == index_rows[inside]
        found = np.full(len(index_rows), -1, np.int64)
        found[hit] = order[at[hit]]
        return found


def gather(starts: np.ndarray, tokens: np.ndarray, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tokens the rows `frontier` name (CSR: row i's are tokens[starts[i]:starts[i+1]]), and whose each is."""
    first, counts = starts[frontier], starts[frontier + 1] - starts[frontier]
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    shift = np.repeat(first - (np.cumsum(counts) - counts), counts)
    return tokens[shift + np.arange(total)].astype(np.int64), np.repeat(frontier, counts)


def as_rows(rows: array) -> np.ndarray:  # type: ignore[type-arg]
    """An array('q') of index rows as int64 (a copy: the array may grow again)."""
    return np.frombuffer(rows, dtype=np.int64).copy() if len(rows) else np.zeros(0, np.int64)
