"""Reachability: which objects a set of roots names, directly or through other objects; a head's closure.

The (deliberately conservative) rule and why: docs/gc-and-archives.md (Roots and reachability; Details by module)."""

from __future__ import annotations

import heapq
import os
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError, StoreError
from clawstore.store import edges
from clawstore.store.core import codec
from clawstore.store.core.ids import PREFIX, BadObjectIdError, is_hex64
from clawstore.store.core.index import Entries, HeldObjects, Loc, Table
from clawstore.store.core.packfile import pack_path
from clawstore.store.edges import ID_RE, looks_json
from clawstore.store.headdoc import head_fields, is_parted, iter_nodes

if TYPE_CHECKING:
    import numpy as np

    from clawstore.store.core.objects import ObjectStore
    from clawstore.store.reach_arrays import ActionTally, HeldArrays, PackArrays, Tally

_OVERLAP = len(b"blake3:") + 64  # an id split across two chunks is still found
_ID = 32
# Bytes of the index held for look-ups by a cached walk: by arrays, the tables' sort keys (8 bytes an object: 8.4 M
# objects), their rows read in place (reach_arrays.HeldArrays); past it, by rows, the rows themselves (52 bytes an
# object) up to this, the biggest tables looked up in place, a read a look-up. (fsck holds rows up to it too.)
HELD = 64 << 20
_KEY = 8
_WHOLE_MAX = 4 << 20  # objects stored up to this size are read in one go, larger ones streamed
# Ids the walk by arrays gathers at once (the rows of a frontier taken up to it): what it makes for each (its row, its
# parent, a look-up of another pack's: ~100 bytes) is bounded by it, not by a pack's frontier (the head's pack's parts
# name every record: +23 MB at 10,000 x 5 in one step before)
WALK_EDGES = 65536
_STACKED, _WALKED = 1, 2  # the walk by arrays: a file's row or other id stacked (or made to wait) from it; walked


def ids_in(data: bytes | memoryview) -> set[str]:
    """Hex digests of every object id written in `data`."""
    return {m.decode("ascii") for m in ID_RE.findall(data)}


def named_by(store: ObjectStore, hexdigest: str) -> set[str] | None:
    """Hex ids one object names (empty for non-JSON); None if the object is not in the store.

    Reads are verified: a corrupt object raises CorruptObjectError (gc must not guess what it named).
    """
    oid = PREFIX + hexdigest
    try:
        stored = store.locate(oid)[2]
        if stored <= _WHOLE_MAX:
            data = store.get_bytes(oid)
            return ids_in(data) if looks_json(data[:64]) else set()
        return _named_by_streamed(store, hexdigest)
    except MissingObjectError:
        return None


def _named_by_streamed(store: ObjectStore, hexdigest: str) -> set[str]:
    with store.open_object(PREFIX + hexdigest) as reader:
        found: set[str] = set()
        tail = b""
        first = True
        while chunk := reader.read(codec.CHUNK):
            if first:
                first = False
                if not looks_json(chunk[:64]):
                    return set()
            window = tail + chunk
            found |= ids_in(window)
            tail = window[-_OVERLAP:]
        return found


# pack -> its objects a walk left to walk when it takes that pack up: their index rows, and a small segment's
# (digest, offset) (no row)
_Waiting = dict[str, tuple["array[int]", list[tuple[bytes, int]]]]


class Reach:
    """An incrementally grown closure: `mark(roots)` adds everything the roots reach. Cached, a reached object is marked
    by a byte at its row among the index's big tables' rows (HeldObjects numbers them; an object the index lacks, or a
    small segment's, by its digest in a set); uncached, by its 32-byte digest in a set."""

    def __init__(self, store: ObjectStore, cached: bool = False):
        self.store = store
        self.missing: dict[str, str | None] = {}  # hex of a reached but absent object -> who named it
        # With `cached`: what an object names is taken from its pack's edges file when that verifies (edges.py),
        # one pack's file held at a time (the walk goes pack by pack); packs whose file does not are read.
        self._cached = cached
        self._uncached: set[str] = set()
        self.loads = 0  # edges files loaded (a pack's again when the walk comes back to it)
        self._sealed: dict[str, int] = {}  # pack -> its mtime (sealed, or a dedup hit's touch): the order of take-up
        self._view: frozenset[str] | None = None  # the index's segments the finder was made from
        self._finder: HeldObjects | None = None
        self._rows = bytearray()  # a byte a row of the finder's tables: 1 once reached
        self._others: set[bytes] = set()  # reached objects without such a row
        # pack -> a byte a row of its edges file (1 once the walk marked it), then one an other id (1 once stacked)
        self._seen: dict[str, bytearray] = {}
        self._arrays: HeldArrays | None = None  # the finder's tables as arrays (reach_arrays), while it holds them all
        self._seen_arrays: dict[str, np.ndarray] = {}  # as _seen, for the walk by arrays

    def __contains__(self, hexdigest: str) -> bool:
        return self.reached(bytes.fromhex(hexdigest))

    def __len__(self) -> int:
        return self._rows.count(1) + len(self._others)

    def reached(self, digest: bytes) -> bool:
        if digest in self._others:
            return True
        found = self._finder.row_of(digest) if self._finder is not None else None  # (many at once: reached_many)
        return found is not None and found[0] >= 0 and self._rows[found[0]] == 1

    def _row_of(self, digest: bytes) -> tuple[int, str] | None:
        """The finder's `row_of`, by the arrays while they are the finder's (its fan-outs then never built)."""
        finder, held = self._finder, self._arrays
        assert finder is not None
        if held is None or held.finder is not finder:
            return finder.row_of(digest)
        loc = finder._objects.get(digest)
        if loc is not None:
            return -1, loc[0]
        from clawstore.store.core.lean_numpy import np
        from clawstore.store.reach_arrays import NOT_FOUND

        rows, packs = held.lookup(np.array([digest], dtype="S32"))
        row = int(rows[0])
        if row >= 0:
            return row, held.packs[int(packs[0])]
        return None if row == NOT_FOUND else finder.row_of(digest)  # (ids sharing a key: compared whole)

    def tally(self, entries: Entries) -> Tally | None:
        """The objects of `entries`' big tables counted by arrays (reach_arrays.tally); None unless the walk was by
        arrays over exactly these tables (then `objects_of` streams them)."""
        held = self._arrays
        if held is None or held.finder is not self._finder or self._finder is None \
                or [table.name for table in entries.tables] != [name for name, _, _ in self._finder.tables()]:
            return None
        from clawstore.store.reach_arrays import tally

        return tally(held, self._rows, self._others)

    def tally_actions(self, entries: Entries) -> ActionTally | None:
        """The action entries of `entries`' big tables counted by arrays (reach_arrays.tally_actions, their records
        looked up at once); None unless the walk was by arrays (then the entries are streamed)."""
        held = self._arrays
        if held is None or held.finder is not self._finder:
            return None
        from clawstore.store.reach_arrays import tally_actions

        return tally_actions(list(entries.tables), list(entries.actions), self._reached_ids)

    def reached_many(self, digests: list[bytes]) -> list[bool]:
        """`reached` of each digest: by arrays when the walk was (one look-up for all), else one at a time."""
        held = self._arrays
        if held is None or held.finder is not self._finder or not digests:
            return list(map(self.reached, digests))
        from clawstore.store.core.lean_numpy import np

        return self._reached_ids(np.array(digests, dtype="S32")).tolist()  # type: ignore[no-any-return]

    def _reached_ids(self, ids: np.ndarray) -> np.ndarray:
        """`reached` of each id of an `S32` array, by the arrays (which are the finder's)."""
        from clawstore.store.core.lean_numpy import np
        from clawstore.store.reach_arrays import NOT_FOUND, SMALL

        held = self._arrays
        assert held is not None and self._finder is not None
        rows, _ = held.lookup(ids)
        marks = np.frombuffer(self._rows, dtype=np.uint8)
        found = np.zeros(len(rows), bool)
        found[rows >= 0] = marks[rows[rows >= 0]] == 1
        objects, others = self._finder._objects, self._others  # (a small segment's object: reached only by digest)
        for at in np.flatnonzero(rows == SMALL).tolist():  # (np.bytes_ drops trailing zero bytes: tobytes)
            digest = ids[at:at + 1].tobytes()
            found[at] = digest in others if digest in objects else self.reached(digest)
        for at in np.flatnonzero(rows == NOT_FOUND).tolist():  # (the index lacks it)
            found[at] = ids[at:at + 1].tobytes() in others
        if others:  # (marked by digest: e.g. in a table merged away since)
            for at in np.flatnonzero((rows >= 0) & ~found).tolist():
                found[at] = ids[at:at + 1].tobytes() in others
        return found

    def objects_of(self, entries: Entries) -> Iterator[tuple[bytes, Loc, bool]]:
        """Every object `entries` names, sorted by digest and each once (as `Entries.iter_objects`), and whether it is
        reached: a table the marks number is read beside its marks, row by row, not looked up an object at a time."""
        firsts = {name: first for name, first, _ in self._finder.tables()} if self._finder is not None else {}
        streams = [self._table_objects(table, firsts.get(table.name)) for table in entries.tables]
        if entries.objects:
            small = sorted(entries.objects.items())
            answers = self.reached_many([digest for digest, _ in small])
            streams.append((digest, loc, is_reached) for (digest, loc), is_reached in zip(small, answers, strict=True))
        last: tuple[bytes, Loc, bool] | None = None
        for item in heapq.merge(*streams, key=itemgetter(0)) if len(streams) > 1 else chain(*streams):
            if last is not None and item[0] == last[0]:  # (in two segments: the first's place, reached if either is)
                last = (last[0], last[1], last[2] or item[2])
                continue
            if last is not None:
                yield last
            last = item
        if last is not None:
            yield last

    def _table_objects(self, table: Table, first: int | None) -> Iterator[tuple[bytes, Loc, bool]]:
        if first is None:  # (a table the index gained since the last mark: each looked up)
            reached = self.reached
            yield from ((digest, loc, reached(digest)) for digest, loc in table.iter_objects())
            return
        marks, others = self._rows, self._others
        for row, (digest, loc) in enumerate(table.iter_objects(), first):
            yield digest, loc, marks[row] == 1 or digest in others

    @property
    def marked(self) -> set[str]:
        """Hex digests of the reached objects (made on each call: callers that only ask use `in`, `reached`)."""
        found = {digest.hex() for digest in self._others}
        if self._finder is not None:
            rows, at_row = self._rows, self._finder.at_row
            row = rows.find(1)
            while row >= 0:
                found.add(at_row(row)[0].hex())
                row = rows.find(1, row + 1)
        return found

    def marked_digests(self) -> bytes:
        """The reached objects' 32-byte digests, one after the other (in no order): `marked` without a str each."""
        found = bytearray().join(self._others)
        if self._finder is not None:
            rows, at_row = self._rows, self._finder.at_row
            row = rows.find(1)
            while row >= 0:
                found += at_row(row)[0]
                row = rows.find(1, row + 1)
        return bytes(found)

    def mark(self, roots: Iterable[str], named_from: str | None = None) -> int:
        """Mark `roots` (ids or hex digests) and their closure; returns how many objects were newly marked.
        Cached, objects of a pack with an edges file wait until the walk takes that pack up: one file held at once, and
        a waiting object held as its row (8 bytes: the head's pack names most of the store)."""
        before = len(self)
        parent = _digest(named_from) if named_from is not None else None
        stack: list[tuple[bytes, bytes | None]] = [(_digest(root), parent) for root in roots]
        waiting: _Waiting = {}
        current: edges.PackEdges | None = None
        finder = self._find_rows() if self._cached else None
        held = self._held_arrays(finder) if finder is not None else None
        walking: PackArrays | None = None  # `current` as arrays, with `held`
        rows, others, uncached = self._rows, self._others, self._uncached
        if held is not None and len(stack) > 1:
            stack = self._roots_waiting(stack, held, waiting)
        while True:
            while stack:
                digest, parent = stack.pop()
                if digest in others:
                    continue
                found = self._row_of(digest) if finder is not None else None
                if found is not None:
                    row, pack = found
                    if row >= 0 and rows[row]:
                        continue
                    if pack not in uncached:  # (what the index lacks is read)
                        offset = finder.digest_offset(row)[1] if row >= 0 else _offset(finder, digest)
                        if current is None or current.pack != pack:
                            later = waiting.get(pack) or waiting.setdefault(pack, (array("q"), []))
                            if row >= 0:
                                later[0].append(row)
                            else:
                                later[1].append((digest, offset))
                            continue
                        at = current.position(digest, offset)
                        if at is not None and walking is not None:
                            self._walk_arrays(walking, _one(at), _one(row), stack, waiting)
                            continue
                        if at is not None:  # (the pack's own edges followed by row, what it names elsewhere stacked)
                            self._walk(current, [(digest, offset, row)], stack, finder, waiting)
                            continue
                names = named_by(self.store, digest.hex())  # (no file that verifies covers it: read)
                if names is None:
                    self.missing.setdefault(digest.hex(), parent.hex() if parent is not None else None)
                    continue
                if self.missing:
                    self.missing.pop(digest.hex(), None)
                if found is not None and found[0] >= 0:
                    rows[found[0]] = 1  # (marks: this bytearray, or a view of it made by the walk by arrays)
                else:
                    others.add(digest)
                stack.extend((bytes.fromhex(hexdigest), digest) for hexdigest in names)
            if not waiting:
                return len(self) - before
            pack = max(waiting, key=self._sealed_at)
            later_rows, later_small = waiting.pop(pack)
            assert finder is not None  # (only a cached walk waits)
            current = walking = None  # (released before the next is read)
            runtime = self.store.runtime
            current = edges.load(self.store.root, runtime.packs_dir, pack)
            if current is None:  # (a pack sealed before writers wrote them, or by a writer killed first)
                current = edges.build(self.store.root, runtime.packs_dir, runtime.tmp_dir, pack)
            self.loads += 1
            starts = chain(((*finder.digest_offset(row), row) for row in later_rows),
                           ((digest, offset, -1) for digest, offset in later_small))
            if current is None:
                self._uncached.add(pack)  # its objects are read
                stack = [(digest, None) for digest, _, _ in starts]
            elif held is not None:
                walking, stack = self._take_up(current, held, later_rows, later_small, finder, waiting)
            else:  # those the file covers walked from their rows at once, the others left on the stack
                stack = self._walk(current, starts, [], finder, waiting)
            del later_rows, later_small, starts

    def _roots_waiting(self, stack: list[tuple[bytes, bytes | None]], held: HeldArrays, waiting: _Waiting
                       ) -> list[tuple[bytes, bytes | None]]:
        """A mark's roots looked up at once (one look-up, where the loop makes one a root: ~0.1 ms of numpy each, 7 s of
        a 2,000 x 5 gc --dry-run marking a killed build's 38,000 records, store/buildlogs.py unadopted_records): each
        found in a held table waits for its pack's take-up, as the loop would have it wait; one reached already is
        dropped. What is left (returned) the loop looks up an object at a time: a small segment's object, an id the
        arrays cannot place or the index lacks, one of a pack read without its file."""
        from clawstore.store.core.lean_numpy import np

        found, packs = held.lookup(np.array([digest for digest, _ in stack], dtype="S32"))
        rows, others, uncached, small = self._rows, self._others, self._uncached, held.finder._objects
        left = []
        for item, row, number in zip(stack, found.tolist(), packs.tolist(), strict=True):
            digest = item[0]
            if digest in others:
                continue
            if row >= 0 and digest not in small:
                if rows[row]:
                    continue
                pack = held.packs[number]
                if pack not in uncached:
                    (waiting.get(pack) or waiting.setdefault(pack, (array("q"), [])))[0].append(row)
                    continue
            left.append(item)
        return left

    def _sealed_at(self, pack: str) -> tuple[int, str]:
        """The newest pack waiting is taken up first: an object names objects written before it, so that order meets
        most packs once, where taking them as they came met a third of them twice at 10,000 x 5 (each time its file
        loaded and its pack hashed again). Any order marks the same; a pack that cannot be read goes last."""
        sealed = self._sealed.get(pack)
        if sealed is None:
            try:
                sealed = os.stat(pack_path(self.store.runtime.packs_dir, pack)).st_mtime_ns
            except OSError:
                sealed = -1
            self._sealed[pack] = sealed
        return sealed, pack

    def _held_arrays(self, finder: HeldObjects) -> HeldArrays | None:
        """The finder's tables as arrays, for the walk by arrays; None if some are looked up in place (past HELD: that
        walk is the one by rows)."""
        if self._arrays is not None and self._arrays.finder is finder:
            return self._arrays
        self._arrays = None
        if finder._held or _KEY * finder.rows > HELD:  # (the keys do not fit HELD: the walk by rows)
            return None
        from clawstore.store.reach_arrays import HeldArrays  # (numpy: only this walk pays its import)

        held = HeldArrays(finder)
        self._arrays = held if held.in_order else None
        return self._arrays

    def _take_up(self, found: edges.PackEdges, held: HeldArrays, later_rows: array[int],
                 later_small: list[tuple[bytes, int]], finder: HeldObjects, waiting: _Waiting
                 ) -> tuple[PackArrays, list[tuple[bytes, bytes | None]]]:
        """Walk the objects waiting for the pack `found` is about (by arrays); what is left to look up (returned):
        those its file does not cover."""
        from clawstore.store.core.lean_numpy import np
        from clawstore.store.reach_arrays import PackArrays, as_rows

        seen = self._seen_arrays.get(found.pack)
        if seen is None or len(seen) != len(found.known) // _ID:
            seen = self._seen_arrays[found.pack] = np.zeros(len(found.known) // _ID, np.uint8)
        walking = PackArrays(found, held, seen)
        waited = as_rows(later_rows)
        at = walking.file_rows(waited)
        matched = at >= 0
        matched[matched] = walking.covers[at[matched]]
        more_starts: list[int] = []
        more_rows: list[int] = []
        stack: list[tuple[bytes, bytes | None]] = []
        # (the rest as the walk by rows takes them: found by offset, or looked up)
        rest = chain(((*finder.digest_offset(row), row) for row in waited[~matched].tolist()),
                     ((digest, offset, -1) for digest, offset in later_small))
        for digest, offset, row in rest:
            position = found.position(digest, offset)
            if position is None:
                stack.append((digest, None))
            else:
                more_starts.append(position)
                more_rows.append(row)
        # (as arrays: the matched rows, most of them, never made Python ints)
        starts = np.concatenate((at[matched], np.array(more_starts, np.int64)))
        start_rows = np.concatenate((waited[matched], np.array(more_rows, np.int64)))
        del at, waited, matched
        self._walk_arrays(walking, starts, start_rows, stack, waiting)
        return walking, stack

    def _walk_arrays(self, walking: PackArrays, starts: np.ndarray, start_rows: np.ndarray,
                     stack: list[tuple[bytes, bytes | None]], waiting: _Waiting) -> None:
        """`_walk` by arrays: mark the file rows `starts` (at the index rows `start_rows`, -1: by digest) and what they
        reach in this pack a frontier at a time (the tokens of the frontier's rows gathered, those seen dropped); an id
        of another pack waits for it by its index row, one the arrays cannot place (not covered, no row of this pack's
        matched to it, a small segment's, the index lacks it) goes on `stack`, once a pack."""
        from clawstore.store.core.lean_numpy import np
        from clawstore.store.reach_arrays import first_of_each, gather

        held = self._arrays
        assert held is not None
        marks = np.frombuffer(self._rows, dtype=np.uint8)  # (a view: written through)
        seen, rows, ids = walking.seen, walking.rows, walking.found.known
        uncached = np.zeros(len(held.packs) + 1, bool)  # (the last: no pack, as -1 indexes it)
        for pack in self._uncached:
            if pack in held.number:
                uncached[held.number[pack]] = True
        own_pack = held.number.get(walking.pack, -2)
        frontier = starts.astype(np.int64, copy=False)
        frontier_rows = start_rows.astype(np.int64, copy=False)
        fresh = seen[frontier] != _WALKED  # (one stacked from here comes back as a start)
        frontier, first = first_of_each(frontier[fresh])
        todo = [(frontier, frontier_rows[fresh][first])]
        # The ids to look up (file rows and their parents' rows), gathered over the frontiers until WALK_EDGES of them:
        # a look-up reads the tables' rows in place (`rows_at`) wherever its ids' keys fall, nearly all of a table for a
        # few thousand ids as for 65,536, and a pack's frontiers made one each (a dry run at 10,000 x 5: 22 look-ups by
        # the walk, 16 since)
        later: list[tuple[np.ndarray, np.ndarray]] = []
        gathered = 0
        while todo:
            frontier, frontier_rows = _cut(todo, walking.starts)
            seen[frontier] = _WALKED
            self._mark_rows(marks, ids, frontier, frontier_rows)
            tokens, parents = gather(walking.starts, walking.tokens, frontier)
            fresh = seen[tokens] == 0
            tokens, first = first_of_each(tokens[fresh])
            parents = parents[fresh][first]
            seen[tokens] = _STACKED  # (those walked below become _WALKED with their frontier)
            own = tokens < rows
            mine, mine_parents = walking.alias[tokens[own]], parents[own]
            index_rows = walking.index_row[mine]
            walkable = walking.covers[mine] & (index_rows >= 0)
            frontier, frontier_rows = mine[walkable], index_rows[walkable]
            unmarked = marks[frontier_rows] == 0  # (one marked has its closure marked, or on its way)
            if unmarked.any():
                todo.append((frontier[unmarked], frontier_rows[unmarked]))
            del frontier, frontier_rows
            # The rest looked up: another pack's ids, and this pack's rows the file does not cover or the index names
            # elsewhere (a blob stored twice: the index's copy is walked)
            other = np.concatenate((tokens[~own], mine[~walkable]))
            if later and gathered + len(other) > WALK_EDGES:  # (never more at once than a frontier's, or WALK_EDGES)
                self._place(walking, later, own_pack, uncached, stack, waiting)
                later, gathered = [], 0
            if len(other):
                later.append((other, np.concatenate((parents[~own], mine_parents[~walkable]))))
                gathered += len(other)
            if later and (gathered >= WALK_EDGES or not todo):
                self._place(walking, later, own_pack, uncached, stack, waiting)
                later, gathered = [], 0

    def _place(self, walking: PackArrays, later: list[tuple[np.ndarray, np.ndarray]], own_pack: int,
               uncached: np.ndarray, stack: list[tuple[bytes, bytes | None]], waiting: _Waiting) -> None:
        """Look up the ids at the file rows gathered in `later` (each part's rows, and the rows naming them) at once:
        each of another pack the walk reads by its file waits for it by its index row (unless marked), the others go on
        `stack`."""
        from clawstore.store.core.lean_numpy import np
        from clawstore.store.reach_arrays import sort_order

        held = self._arrays
        assert held is not None
        marks = np.frombuffer(self._rows, dtype=np.uint8)
        other, other_parents = (np.concatenate(parts) for parts in zip(*later, strict=True))
        found_rows, found_packs = held.lookup(walking.known[other])
        waits = (found_rows >= 0) & (found_packs != own_pack) & ~uncached[found_packs]
        _push(stack, walking.found.known, other[~waits], other_parents[~waits])
        found_rows, found_packs = found_rows[waits], found_packs[waits]
        unmarked = marks[found_rows] == 0
        found_rows, found_packs = found_rows[unmarked], found_packs[unmarked]
        if not len(found_rows):
            return
        order = sort_order(found_packs)
        found_rows, found_packs = found_rows[order], found_packs[order]
        cuts = np.flatnonzero(found_packs[1:] != found_packs[:-1]) + 1  # (where each pack begins, but the first)
        packs = found_packs[np.concatenate(([0], cuts))]
        for number, part in zip(packs.tolist(), np.split(found_rows, cuts), strict=True):
            name = held.packs[number]
            (waiting.get(name) or waiting.setdefault(name, (array("q"), [])))[0].frombytes(part.tobytes())

    def _mark_rows(self, marks: np.ndarray, ids: bytes, file_rows: np.ndarray, index_rows: np.ndarray) -> None:
        """Mark each file row at its index row (-1: by its digest, a small segment's object)."""
        marks[index_rows[index_rows >= 0]] = 1
        for row in file_rows[index_rows < 0].tolist():
            self._others.add(ids[row * _ID:(row + 1) * _ID])
        if self.missing:
            for row in file_rows.tolist():
                self.missing.pop(ids[row * _ID:(row + 1) * _ID].hex(), None)

    def _find_rows(self) -> HeldObjects:
        """The index's object look-up as it stands now, without listing it again on a miss (what it lacks is asked the
        long way, by named_by), its big tables' rows held in memory up to HELD bytes: the walk looks up every object it
        reaches. Made again only when the index changed since the last mark: the marks of a table still there are
        carried to its new rows, those of a table gone (merged into another) into the set by digest."""
        index = self.store.runtime.index
        index.lacking(())  # (one look for changes, as a look-up makes)
        view = index.snapshot()
        if self._finder is not None and self._view == view.loaded:
            return self._finder
        names = {table.name for table in view.entries.tables}
        kept: dict[str, bytes] = {}
        if self._finder is not None:
            old, marks = self._finder, self._rows
            for name, first, n in old.tables():
                if name in names:
                    kept[name] = bytes(marks[first:first + n])
                    continue
                row = marks.find(1, first, first + n)
                while row >= 0:
                    self._others.add(old.at_row(row)[0])
                    row = marks.find(1, row + 1, first + n)
        self._finder, self._rows = None, bytearray()  # (released before the next is read)
        # The walk by arrays holds the tables' keys (8 bytes a row) and reads their rows in place; past HELD, the walk
        # by rows holds rows up to HELD (52 bytes each) and looks the rest up in place
        keys_fit = _KEY * sum(table._head.n_objects for table in view.entries.tables) <= HELD
        finder = HeldObjects(view.entries, 0 if keys_fit else HELD, fanned=False)  # (arrays may never need fan-outs)
        marks = bytearray(finder.rows)
        for name, first, n in finder.tables():
            if name in kept:
                marks[first:first + n] = kept.pop(name)
        self._view, self._finder, self._rows = view.loaded, finder, marks
        return finder

    def _walk(self, found: edges.PackEdges, starts: Iterable[tuple[bytes, int, int]],
              stack: list[tuple[bytes, bytes | None]], finder: HeldObjects, waiting: _Waiting
              ) -> list[tuple[bytes, bytes | None]]:
        """Mark the objects `starts` (digest, offset in the pack `found` is about, index row or -1) and what they reach
        inside that pack, by row numbers over the file's arrays (no list of ids made an object); an id named that
        another pack holds waits for it in `waiting` by its index row; one the file does not cover, or the index has no
        row of, goes on `stack` to be looked up, and so do starts the file does not cover (returned: `stack`). Rows
        marked are remembered a pack at a time (a byte a row), so a pack the walk comes back to is not walked again; an
        id of another pack is stacked (or made to wait) once a pack."""
        rows, known, covers, tokens, edge_at = len(found.offsets), found.known, found.covers, found.tokens, found.starts
        seen = self._seen.get(found.pack)  # (its rows, then the other ids it names: each of them stacked once)
        if seen is None or len(seen) != len(known) // _ID:
            seen = self._seen[found.pack] = bytearray(len(known) // _ID)
        todo: list[int] = []
        new: list[tuple[int, int]] = []  # (row of the file, row of the index or -1) of each object marked
        offsets, marks, row_of, pack = found.offsets, self._rows, finder.row_of, found.pack
        uncached = self._uncached
        for digest, offset, index_row in starts:  # (their rows in the file found by offset, as `position` does)
            row = bisect_left(offsets, offset)
            if row == rows or offsets[row] != offset or not covers[row] \
                    or known[row * _ID:(row + 1) * _ID] != digest:
                stack.append((digest, None))
                continue
            if not seen[row]:
                seen[row] = 1
                todo.append(row)
                new.append((row, index_row))
        while todo:
            at = todo.pop()
            for token in tokens[edge_at[at]:edge_at[at + 1]]:
                if token < rows and covers[token]:
                    if seen[token]:
                        continue
                    child = known[token * _ID:token * _ID + _ID]
                    hit = row_of(child)
                    if hit is not None:  # (the index says what is there: one it lacks is asked below)
                        seen[token] = 1
                        todo.append(token)
                        new.append((token, hit[0]))
                        continue
                elif token >= rows:
                    if seen[token]:
                        continue
                    seen[token] = 1
                    child = known[token * _ID:token * _ID + _ID]
                    hit = row_of(child)  # (another pack's: its row waits for that pack, not a tuple on the stack)
                    if hit is not None and hit[0] >= 0 and hit[1] != pack and hit[1] not in uncached:
                        if not marks[hit[0]]:
                            (waiting.get(hit[1]) or waiting.setdefault(hit[1], (array("q"), [])))[0].append(hit[0])
                        continue
                else:  # (a row the file does not cover: stacked once a pack, as another pack's id is)
                    if seen[token]:
                        continue
                    seen[token] = 1
                    child = known[token * _ID:token * _ID + _ID]
                stack.append((child, known[at * _ID:at * _ID + _ID]))
        missing = self.missing
        for at, index_row in new:
            if index_row >= 0:
                marks[index_row] = 1
            else:
                self._others.add(known[at * _ID:at * _ID + _ID])
            if missing:
                missing.pop(known[at * _ID:at * _ID + _ID].hex(), None)
        return stack


def _cut(todo: list[tuple[np.ndarray, np.ndarray]], starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The next rows of the walk by arrays to take (file rows, index rows), from the last of `todo`: as many as name
    WALK_EDGES ids at most (one row at least), the rest left on it."""
    from clawstore.store.core.lean_numpy import np

    frontier, frontier_rows = todo.pop()
    named = np.cumsum(starts[frontier + 1] - starts[frontier])
    cut = max(1, int(np.searchsorted(named, WALK_EDGES, side="right")))
    if cut < len(frontier):
        todo.append((frontier[cut:], frontier_rows[cut:]))
    return frontier[:cut], frontier_rows[:cut]


def _one(value: int) -> np.ndarray:
    """One row as an int64 array (a start of the walk by arrays)."""
    from clawstore.store.core.lean_numpy import np

    return np.array([value], np.int64)


def _push(stack: list[tuple[bytes, bytes | None]], ids: bytes, rows: np.ndarray, parents: np.ndarray) -> None:
    """Stack the ids at `rows` of a file's `ids`, each named by the one at its parent's row."""
    for row, parent in zip(rows.tolist(), parents.tolist(), strict=True):
        stack.append((ids[row * _ID:(row + 1) * _ID], ids[parent * _ID:(parent + 1) * _ID]))


def _offset(finder: HeldObjects, digest: bytes) -> int:
    loc = finder.find(digest)
    assert loc is not None  # (row_of found it)
    return loc[1]


def _digest(root: str) -> bytes:
    hexdigest = root[len(PREFIX):] if root.startswith(PREFIX) else root
    if not is_hex64(hexdigest):
        raise BadObjectIdError(f"not a valid object id: {root!r} (expected blake3:<64 hex digits>)")
    return bytes.fromhex(hexdigest)


@dataclass
class HeadClosure:
    """A campaign head and everything it reaches: what a push of its ref or an export sends."""

    head_id: str
    head: dict[str, Any]  # its own fields (campaign, build_id...): its nodes are not held
    objects: set[str]  # hex digests of everything the head reaches (empty if asked `packed`)
    actions: dict[str, str]  # node key -> record id, as the head has them
    digests: bytes = b""  # asked `packed`: the 32-byte digests of everything the head reaches, in no order


def head_closure(store: ObjectStore, head_id: str, packed: bool = False) -> HeadClosure:
    """Every object the head reaches (records, input documents, outputs, trees and their files); `packed`: as
    `digests` (32 bytes an object, an export's), not as a set of hex strs."""
    reach = Reach(store)
    reach.mark([head_id])
    if reach.missing:
        hexdigest, parent = sorted(reach.missing.items())[0]
        named = f" (named by {PREFIX}{parent})" if parent else ""
        raise StoreError(f"campaign closure is incomplete: object {PREFIX}{hexdigest}{named} is missing"
                         f"{f' (and {len(reach.missing) - 1} more)' if len(reach.missing) > 1 else ''}; "
                         "run claw fsck")
    doc = store.get_json(head_id)
    if not isinstance(doc, dict) or not (is_parted(doc) or isinstance(doc.get("nodes"), list)):
        raise StoreError(f"{head_id} is not a campaign head")
    # The nodes a part at a time: their actions are what is kept of them.
    actions = {str(n["key"]): str(n["record"]) for n in iter_nodes(doc, store.get_json)
               if isinstance(n, dict) and n.get("key") and n.get("record")}
    if packed:
        digests, objects = reach.marked_digests(), set()
    else:
        digests, objects = b"", reach.marked
    del reach
    return HeadClosure(head_id, head_fields(doc), objects, dict(sorted(actions.items())), digests)
