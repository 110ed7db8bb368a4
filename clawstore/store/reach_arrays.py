"""Reach's cached walk by arrays: the index's held object rows and a pack's edges file as numpy arrays, so that a pack's
objects are matched to their index rows, the ids they name looked up and their closure marked a frontier at a time
(bulk arithmetic in C) instead of a Python step an object. Imported only by that walk (numpy costs ~40 ms to import).

What it answers is what `HeldObjects.row_of` answers, a row's first table first; anything it cannot answer exactly
(a small segment's object, an id the index lacks, two ids sharing their first 8 bytes) it leaves to the caller's
look-up an object at a time. docs/gc-and-archives.md (Details by module, store/reach.py).
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawstore.store.core.index import NO_RECORD, ActionEntry, BadSegmentError, HeldObjects, Loc, Table
from clawstore.store.core.lean_numpy import np

if TYPE_CHECKING:
    from clawstore.store.core.edgefile import PackEdges

_ID = 32
_OBJ = struct.Struct("<32sIQQ")  # an index table's object row (index._OBJ)
_ACT = struct.Struct("<32s32sqIQ")  # and an action row (index._ACT)
# An object row of an index table (index._OBJ, 52 bytes): its digest, its first 8 bytes as a sort key, slot, offset
_ROW = np.dtype({"names": ["digest", "key", "slot", "offset", "length"], "formats": ["S32", ">u8", "<u4", "<u8", "<u8"],
                 "offsets": [0, 0, 32, 36, 44], "itemsize": 52})
_WHOLE = np.dtype("V52")  # (the same rows as bytes: numpy gathers them ~7x faster than as fields)
_WORDS = np.dtype({"names": ["w0", "w1", "w2", "w3"], "formats": ["<u8"] * 4, "offsets": [0, 8, 16, 24],
                   "itemsize": 52})  # (a row's id as four words)
NOT_FOUND = -1  # no held row: the caller looks it up (the index may lack it)
SMALL = -2  # a small segment's object (row_of's row -1), or an id whose key another shares: looked up by the caller


def search(sorted_values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of `wanted` is or would be in `sorted_values` (np.searchsorted), the queries taken in sorted order:
    each search then starts where the last ended, in memory the last touched (2-3x faster on a table of 445,000)."""
    # (a table's own keys come sorted, and `locate`'s; a few thousand values stay in the cache in any order)
    if len(wanted) < 64 or len(sorted_values) < 4096 or not (wanted[1:] < wanted[:-1]).any():
        return np.searchsorted(sorted_values, wanted)
    order = near_order(wanted)
    found = np.empty(len(wanted), np.int64)
    found[order] = np.searchsorted(sorted_values, wanted[order])
    return found


def _position_bits(n: int) -> int:
    """Bits a position among `n` values takes."""
    return max(n - 1, 1).bit_length()


def sort_order(values: np.ndarray) -> np.ndarray:
    """A stable argsort of integers: each value packed above its position into one uint64 and those sorted, where
    they fit (numpy sorts plain integers by SIMD: 2.5x faster than an argsort of 63,000 values, where `np.unique`'s
    stable one with `return_index` took 4.7x); an argsort otherwise (a negative value, or one too wide)."""
    n = len(values)
    if n < 2:
        return np.arange(n, dtype=np.int64)
    shift = _position_bits(n)
    if int(values.min()) < 0 or int(values.max()) >> (64 - shift):
        return np.argsort(values, kind="stable")
    packed = values.astype(np.uint64) << np.uint64(shift)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    packed &= np.uint64((1 << shift) - 1)
    return packed.astype(np.int64)


def near_order(values: np.ndarray) -> np.ndarray:
    """An order of integers that sorts them but for their lowest bits (as many as a position takes: values that agree
    above those come by position), by one sort of uint64s as `sort_order`; for searches whose queries are only faster
    in order (a search and `rows_at` take any order, and check theirs): `sort_order` where the values are negative."""
    n = len(values)
    if n < 2 or (values.dtype.kind == "i" and int(values.min()) < 0):
        return sort_order(values)
    shift = np.uint64(_position_bits(n))
    packed = values.astype(np.uint64) >> shift
    packed <<= shift
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    packed &= (np.uint64(1) << shift) - np.uint64(1)
    return packed.astype(np.int64)


def first_of_each(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_index=True)` of integers: the values sorted, each once, and where each is first, by
    `sort_order` (stable: a value's first place comes first among its own)."""
    order = sort_order(values)
    ordered = values[order]
    new = np.empty(len(ordered), bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    return ordered[new], order[new]


def same_ids(rows: np.ndarray, digests: np.ndarray) -> np.ndarray:
    """Whether each row's id (`rows` as _ROW, or `S32` ids) is the id beside it in `digests` (`S32`): compared as four
    8-byte words (numpy compares `S32` a byte at a time: 3 ms for 63,000 ids, 0.7 ms as words)."""
    theirs = np.ascontiguousarray(digests).view(np.uint64).reshape(-1, 4)
    if rows.dtype == _ROW:
        view = rows.view(_WORDS)
        mine = [view[name] for name in _WORDS.names]
    else:
        words = np.ascontiguousarray(rows).view(np.uint64).reshape(-1, 4)
        mine = [words[:, at] for at in range(4)]
    same = mine[0] == theirs[:, 0]
    for at in range(1, 4):
        same &= mine[at] == theirs[:, at]
    return same


def keys_of(digests: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each 32-byte id (an `S32` array) as a native uint64: ids sort as their keys do."""
    return np.ascontiguousarray(digests).view(">u8").reshape(-1, 4)[:, 0].astype(np.uint64)


# Object rows read from an index table in place at once (~850 KB), where the walk reads them in order (its keys, a
# pack's rows, a tally): what it holds of a table while it reads it, not the table
ROWS_READ = 16384
# Rows the walk reads in place for its look-ups (the whole id and pack of each key matched) that are at most this far
# apart are read in one read (13 KB): one read a hit at worst, one a group of hits where they are dense. A read costs
# ~3 us of Python and system call, a gap's bytes ~1 us at 13 KB (at 64 rows a dry run at 10,000 x 5 made 44,790 reads,
# now 6,077 of 588 MiB against 376; its look-ups 0.30 -> 0.26 s: docs/scale/gc-and-fsck.md, session 65)
_GAP = 256


def rows_at(table: Table, rows: np.ndarray) -> np.ndarray:
    """The object rows of `table` at `rows` (as _ROW, in the order asked), read in place: rows at most _GAP apart in one
    read (a read spanning at most ROWS_READ rows), the reads' bytes held ROWS_READ rows' worth at a time."""
    ordered = len(rows) < 2 or not (rows[1:] < rows[:-1]).any()
    if not ordered:
        wanted, back = np.unique(rows, return_inverse=True)
    else:  # (asked in order, as `locate` asks: its repeats dropped without a sort)
        new = np.empty(len(rows), bool)
        new[:1] = True
        np.not_equal(rows[1:], rows[:-1], out=new[1:])
        wanted, back = rows[new], np.cumsum(new) - 1
    found = np.empty(len(wanted), _ROW)
    if not len(wanted):
        return found
    whole = found.view(_WHOLE)
    at, size = table._head.objects_at, _ROW.itemsize
    # Each read: a run of wanted rows, cut where two are more than _GAP apart or enter another ROWS_READ rows' window
    cut = np.flatnonzero((np.diff(wanted) > _GAP) | (np.diff(wanted // ROWS_READ) != 0)) + 1
    firsts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [len(wanted)]))
    spans = wanted[ends - 1] - wanted[firsts] + 1  # (rows each read takes)
    # A batch of reads at a time: the reads whose spans add up to ROWS_READ rows (one at least)
    batch = np.cumsum(spans) // ROWS_READ
    bounds = np.flatnonzero(np.diff(batch)) + 1
    fd = table._fd
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(firsts)], strict=True):
        starts, lengths = wanted[firsts[lo:hi]], spans[lo:hi]
        # (read into one buffer: not a bytes object a read, thousands of them held at once to be joined)
        data = bytearray(int(lengths.sum()) * size)
        with memoryview(data) as into:
            place = 0
            for start, n in zip(starts.tolist(), (lengths * size).tolist(), strict=True):
                if os.preadv(fd, [into[place:place + n]], at + start * size) != n:
                    raise BadSegmentError(f"index segment {table.name} is truncated")
                place += n
        # Where each wanted row is in `data`: its read's place there, plus its place in its read
        placed = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        first, end = int(firsts[lo]), int(ends[hi - 1])
        read_of = np.repeat(np.arange(hi - lo), ends[lo:hi] - firsts[lo:hi])
        whole[first:end] = np.frombuffer(data, _WHOLE)[wanted[first:end] - starts[read_of] + placed[read_of]]
    return found if ordered and len(wanted) == len(rows) else whole[back].view(_ROW)  # (in order, none twice: as is)


def table_batches(table: Table, first: int = 0, end: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows as _ROW) of a table's object rows from `first`, read in place ROWS_READ at a time."""
    at, size = table._head.objects_at, _ROW.itemsize
    end = table._head.n_objects if end is None else end
    for lo in range(first, end, ROWS_READ):
        hi = min(end, lo + ROWS_READ)
        yield lo, np.frombuffer(table._read(at + lo * size, at + hi * size), _ROW)


class _Sparse:
    """Values at a few positions of a table's rows (sorted positions): the first row of an object an earlier table, or a
    small segment, also has."""

    def __init__(self, positions: np.ndarray, values: np.ndarray):
        self.positions, self.values = positions, values

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The value at each row, NOT_FOUND where none."""
        found = np.full(len(rows), NOT_FOUND, np.int64)
        if len(self.positions):
            at = np.minimum(np.searchsorted(self.positions, rows), len(self.positions) - 1)
            hit = self.positions[at] == rows
            found[hit] = self.values[at[hit]]
        return found


class HeldArrays:
    """The index's big tables as the walk by arrays needs them, read in place (store/core/index.Table: its file by
    offset) but for their rows' sort keys (each id's first 8 bytes, 8 bytes a row held): a bulk `lookup` (the keys
    searched, each matched row read to compare the whole id and name its pack) and each pack's rows (`pack_rows`, the
    tables read through). Only for a finder that holds no rows itself (all its tables in `_rest`). The rows themselves
    (52 bytes each) were held until session 61: 25 MB at 10,000 x 5, the walk's biggest part."""

    def __init__(self, finder: HeldObjects):
        self.finder = finder
        number: dict[str, int] = {}
        # (the table, its keys, first row, pack number of each slot)
        self._tables: list[tuple[Table, np.ndarray, int, np.ndarray]] = []
        small = list(finder._objects)
        self._small = set(small)
        self._small_keys = np.sort(keys_of(np.array(small, dtype="S32"))) if small else np.zeros(0, np.uint64)
        # Rows out of order (a damaged table) would make `searchsorted` miss objects that are there, and a row twice
        # be marked at its second row (matched from its pack's file) while a look-up answers with the first: such an
        # index is walked by rows (whose look-ups refuse it, or find what it holds, a row of an id always its first)
        self.in_order = True
        # A row's first row (row_of's answer) when an earlier table, or a small segment, has its digest too
        self._first: list[_Sparse | None] = []
        for table, first in finder._rest:
            slots = np.array([number.setdefault(name, len(number)) for name in table.packs], dtype=np.int64)
            keys = np.empty(table._head.n_objects, np.uint64)
            positions, values = [], []
            last: tuple[int, bytes] | None = None
            for lo, view in table_batches(table):
                part = view["key"].astype(np.uint64)
                keys[lo:lo + len(part)] = part
                self.in_order = self.in_order and _in_order_once(view, part, last)
                last = (int(part[-1]), view["digest"][-1:].tobytes()) if len(part) else last
                earlier = self._search(view["digest"], part, self._tables)[0] if self._tables else None
                if self._small:
                    hit = np.flatnonzero(self._is_small_key(part))
                    digests = view["digest"]
                    small_rows = [at for at in hit.tolist() if digests[at:at + 1].tobytes() in self._small]
                    if small_rows:
                        earlier = np.full(len(part), NOT_FOUND, np.int64) if earlier is None else earlier
                        earlier[small_rows] = SMALL
                if earlier is not None:
                    marked = np.flatnonzero(earlier != NOT_FOUND)
                    positions.append(marked + lo)
                    values.append(earlier[marked])
                del view, part
            self._tables.append((table, keys, first, slots))
            at = np.concatenate(positions) if positions else np.zeros(0, np.int64)
            self._first.append(_Sparse(at, np.concatenate(values)) if len(at) else None)
        self.packs = list(number)
        self.number = number

    def _is_small_key(self, keys: np.ndarray) -> np.ndarray:
        """Whether each key is a small segment's object's (its whole id is compared by the caller)."""
        small = self._small_keys
        at = search(small, keys)
        at[at == len(small)] = 0
        return small[at] == keys

    @staticmethod
    def usable(finder: HeldObjects) -> bool:
        return not finder._held

    def _search(self, digests: np.ndarray, keys: np.ndarray, tables: list[tuple[Table, np.ndarray, int, np.ndarray]],
                order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The first row (as row_of numbers them) of each id in `tables`, NOT_FOUND, or SMALL if its key matched a
        row of another id (left to row_of), or the row names a slot its table lacks (a damaged table: row_of names
        it); and the pack number, offset and length of each row found (-1, 0, 0 for the others). The ids are taken in
        `order` (their keys sorted by it: each table is then searched and its rows read in order, none copied)."""
        found = np.full(len(digests), NOT_FOUND, np.int64)
        packs = np.full(len(digests), -1, np.int64)
        offsets = np.zeros(len(digests), np.uint64)
        lengths = np.zeros(len(digests), np.uint64)
        todo = np.arange(len(digests)) if order is None else order  # (a part of it stays in its order)
        for table, table_keys, first, slots in tables:
            if not len(todo) or not len(table_keys):
                continue
            wanted = keys[todo]
            at = search(table_keys, wanted)
            inside = at < len(table_keys)
            match = np.zeros(len(todo), bool)
            match[inside] = table_keys[at[inside]] == wanted[inside]
            matched = rows_at(table, at[match])  # (the whole id and the pack of each key matched)
            same = np.zeros(len(todo), bool)
            same[match] = same_ids(matched, digests[todo[match]])
            slot = matched["slot"][same[match]].astype(np.int64)
            bad = slot >= len(slots)
            hits = todo[same]
            found[hits] = np.where(bad, SMALL, first + at[same])
            packs[hits[~bad]] = slots[slot[~bad]]
            offsets[hits] = matched["offset"][same[match]]
            lengths[hits] = matched["length"][same[match]]
            found[todo[match & ~same]] = SMALL  # (ids sharing 8 bytes: row_of compares the whole id)
            todo = todo[~match]
        return found, packs, offsets, lengths

    def lookup(self, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, pack number) of each id (`S32`): row_of's row, NOT_FOUND (the held tables lack it) or SMALL."""
        rows, packs, _, _ = self.locate(digests)
        return rows, packs

    def locate(self, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """As `lookup`, with the offset and length of each row found (what a Loc needs besides the pack's name)."""
        keys = keys_of(digests)
        order = near_order(keys) if len(keys) > 1 and (keys[1:] < keys[:-1]).any() else None  # (sorted once)
        rows, packs, offsets, lengths = self._search(digests, keys, self._tables, order)
        if self._small:
            for at in np.flatnonzero(self._is_small_key(keys)):
                if digests[at:at + 1].tobytes() in self._small:  # (np.bytes_ drops trailing zero bytes)
                    rows[at], packs[at] = SMALL, -1
        return rows, packs, offsets, lengths

    def pack_rows(self, pack: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows of `pack`: (the row row_of finds for each, its offset in the pack, its digest), those row_of
        would answer otherwise (a small segment's object) left out. The tables naming the pack are read through."""
        number = self.number.get(pack)
        found_rows, found_offsets, found_digests = [], [], []
        for (table, _, first, slots), earlier in zip(self._tables, self._first, strict=True):
            wanted = np.flatnonzero(slots == number) if number is not None else ()
            if not len(wanted):
                continue
            for lo, view in table_batches(table):
                slot = view["slot"]
                at = np.flatnonzero(slot == wanted[0] if len(wanted) == 1 else np.isin(slot, wanted))
                rows = first + lo + at
                if earlier is not None:
                    before = earlier.at(lo + at)
                    rows = np.where(before >= 0, before, rows)
                    keep = before != SMALL
                    at, rows = at[keep], rows[keep]
                found_rows.append(rows)
                found_offsets.append(view["offset"][at])
                found_digests.append(view["digest"][at])
        if not found_rows:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, "S32")
        return np.concatenate(found_rows), np.concatenate(found_offsets), np.concatenate(found_digests)


def _in_order_once(view: np.ndarray, keys: np.ndarray, last: tuple[int, bytes] | None) -> bool:
    """Whether a part of a table's rows (as _ROW, with their keys) is in order by whole id, each after the one before
    (none twice), and follows the row before it (`last`: its key and id). Ids sharing a key compared whole: neighbours
    told apart but out of order (an id, another sharing its key, the first again) hid an id twice from a check of
    neighbours alone."""
    if last is not None and len(keys) and (int(keys[0]) < last[0] or (
            int(keys[0]) == last[0] and view["digest"][:1].tobytes() <= last[1])):
        return False
    if (keys[1:] < keys[:-1]).any():
        return False
    tied = np.flatnonzero(keys[1:] == keys[:-1])  # (few: ids sharing their first 8 bytes, or one id twice)
    return not bool((view["digest"][tied] >= view["digest"][tied + 1]).any())


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
    """Tally the tables by their marks (a byte a row; an object marked by digest in `others` too), each read in place
    TALLY_ROWS rows at a time; None if an object is in two rows (the plan then merges them as it streams) or a row
    names a slot its table lacks."""
    if any(first is not None for first in held._first):
        return None  # (an object in two tables, or a table's and a small segment's)
    marked = np.frombuffer(marks, dtype=np.uint8)
    wanted = np.sort(keys_of(np.array(list(others), dtype="S32"))) if others else None
    count, per_pack = 0, np.zeros(len(held.packs), np.int64)
    stored = np.zeros(len(held.packs), np.int64)
    unreached: list[np.ndarray] = []  # per table, its rows not reached
    for table, keys, first, slots in held._tables:
        n = len(keys)
        if n > 1 and (keys[1:] == keys[:-1]).any():
            tied = np.flatnonzero(keys[1:] == keys[:-1])  # (few: their ids compared whole)
            ids = rows_at(table, np.concatenate((tied, tied + 1)))["digest"]
            if (ids[:len(tied)] == ids[len(tied):]).any():
                return None  # (twice in one table)
        not_reached = []
        for lo in range(0, n, TALLY_ROWS):  # (its arrays a part of the table at a time)
            hi = min(n, lo + TALLY_ROWS)
            view = np.concatenate([part for _, part in table_batches(table, lo, hi)])
            if len(view) and view["slot"].max() >= len(slots):
                return None
            pack = slots[view["slot"].astype(np.int64)]
            reached = marked[first + lo:first + hi] == 1
            if wanted is not None and len(wanted):
                part = keys[lo:hi]
                at = search(wanted, part)
                at[at == len(wanted)] = 0
                digests = view["digest"]
                for row in np.flatnonzero((wanted[at] == part) & ~reached).tolist():  # (whole ids compared)
                    reached[row] = digests[row:row + 1].tobytes() in others
            per_pack += np.bincount(pack[reached], minlength=len(held.packs))
            stored += np.bincount(pack[reached], weights=view["length"][reached],
                                  minlength=len(held.packs)).astype(np.int64)  # (exact: sums below 2**53)
            not_reached.append(np.flatnonzero(~reached).astype(np.uint32) + np.uint32(lo))
            del view, pack
        count += n
        unreached.append(np.concatenate(not_reached) if not_reached else np.zeros(0, np.uint32))
    return Tally(count, {held.packs[i]: (int(per_pack[i]), int(stored[i])) for i in np.flatnonzero(per_pack)},
                 sum(len(rows) for rows in unreached), _unreached_objects(held, unreached))


def _unreached_objects(held: HeldArrays, unreached: list[np.ndarray]) -> Iterator[tuple[bytes, Loc]]:
    for (table, _, _, slots), table_rows in zip(held._tables, unreached, strict=True):
        for lo in range(0, len(table_rows), ROWS_READ):  # (read in place a batch at a time)
            view = rows_at(table, table_rows[lo:lo + ROWS_READ].astype(np.int64))
            packs = slots[view["slot"].astype(np.int64)].tolist()
            for digest, pack, offset, length in zip(view["digest"].tolist(), packs, view["offset"].tolist(),
                                                    view["length"].tolist(), strict=True):
                yield digest.ljust(_ID, b"\0"), (held.packs[pack], offset, length)


# An index table's action row (index._ACT, 84 bytes): key, record (NO_RECORD: removed), time, slot, offset
_ACTION = np.dtype({"names": ["key", "sort", "record", "time", "slot", "offset"],
                    "formats": ["S32", ">u8", "S32", "<i8", "<u4", "<u8"], "offsets": [0, 0, 32, 64, 72, 76],
                    "itemsize": 84})
# Action rows read and judged at once (5.5 MB, and their records' look-up ~6 MB): each batch's look-up reads nearly all
# of the object tables' rows wherever its keys fall, so a dry run at 10,000 x 5 read them 14 times at 16,384 (1.4 MB),
# 4 times now: the tally 0.13 -> 0.09 s of CPU in-process, the max RSS the same (the walk's is the peak)
_ACTION_ROWS = 65536


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


# Index rows a pack's file maps to its rows by an array over their span (4 bytes a row: 16 MiB, at a store of 4 M
# objects); past it, by a search of its rows sorted (a sort a pack taken up, and one a batch of rows waiting for it)
SPAN = 4 << 20


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
        same[same] = same_ids(self.known[at[same]], digests[same])
        self.index_row = np.full(rows, -1, np.int64)
        self.index_row[at[same]] = index_rows[same]
        # index row -> file row, for the rows waiting for this pack: an array over the span of the pack's index rows (4
        # bytes a row, held with this pack's file) while that is at most SPAN rows, where a search needed them sorted
        # (argsorts of ~70,000 rows, twice a pack); past it, the file's index rows sorted
        named = np.flatnonzero(self.index_row >= 0)
        self._low = int(self.index_row[named].min()) if len(named) else 0
        span = int(self.index_row[named].max()) + 1 - self._low if len(named) else 0
        self._by_index: tuple[np.ndarray, np.ndarray] | None = None
        self._file_row = np.zeros(0, np.int32)
        if span <= SPAN:
            self._file_row = np.full(span, -1, np.int32)
            self._file_row[self.index_row[named] - self._low] = named
        else:
            order = sort_order(self.index_row)
            self._by_index = (self.index_row[order], order)
        del named
        # A blob the pack holds twice (a batch's object written again): the index names one copy, the file's ids name
        # the last (edgefile.EdgeLog.against); a row the index does not name stands for the row it names of that id
        # (row_of's answer: the walk by rows looks it up and walks that row). Only a row an id of this file names is
        # taken through its alias (the walk's tokens): the others, an action entry's row most (~30 % of a pack's rows
        # at 10,000 x 5, each searched before), alias themselves.
        self.alias = np.arange(rows, dtype=np.int64)
        named_here = np.zeros(rows, bool)
        named_here[self.tokens[self.tokens < rows]] = True
        unnamed = np.flatnonzero((self.index_row < 0) & named_here)
        del named_here
        if len(unnamed) and len(digests):  # (by their keys, then the whole ids compared)
            keys = keys_of(digests)  # (in a table's order, sorted, unless the pack is in two tables)
            by_key = sort_order(keys) if (keys[1:] < keys[:-1]).any() else None
            sorted_keys = keys if by_key is None else keys[by_key]
            wanted = self.known[unnamed]
            at = search(sorted_keys, keys_of(wanted))
            at[at == len(sorted_keys)] = 0
            at = at if by_key is None else by_key[at]
            hit = same_ids(digests[at], wanted)
            named = self.file_rows(index_rows[at[hit]])
            self.alias[unnamed[hit][named >= 0]] = named[named >= 0]

    def file_rows(self, index_rows: np.ndarray) -> np.ndarray:
        """Each index row's row in this file, -1 if the file has none matched to it."""
        found = np.full(len(index_rows), -1, np.int64)
        if self._by_index is None:
            inside = (index_rows >= self._low) & (index_rows < self._low + len(self._file_row))
            found[inside] = self._file_row[index_rows[inside] - self._low]
            return found
        sorted_rows, order = self._by_index
        at = search(sorted_rows, index_rows)
        inside = at < len(sorted_rows)
        hit = np.zeros(len(index_rows), bool)
        hit[inside] = sorted_rows[at[inside]] == index_rows[inside]
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
