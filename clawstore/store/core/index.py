"""The index: object id -> (pack, offset, length) and action key -> record, in immutable segments that are merged as
they accumulate; a big segment is looked up in place (its sorted rows read by offset), a small one from a dict. Byte
layout, lookup and merge rules: docs/store.md (Index)."""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import os
import struct
import tempfile
import threading
import time
import weakref
from array import array
from bisect import bisect_left
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from itertools import accumulate, chain, islice, repeat
from operator import eq, itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import blake3

from clawstore.errors import StoreError
from clawstore.host.durable import fsync_path, write_file_atomic
from clawstore.store.core import columns

MAGIC = b"CLAWIDX\x00"
VERSION = 1
FLAG_PURE = 1
SUFFIX = ".idx"
_HEAD = struct.Struct("<8sIIIIQQ")
_OBJ = struct.Struct("<32sIQQ")
_ACT = struct.Struct("<32s32sqIQ")
_OBJ_DIGEST = struct.Struct(f"<32s{_OBJ.size - 32}x")  # an object row's digest alone
_SLOT = struct.Struct("<I")  # an object row's pack slot, after its digest
_DIGEST_OFFSET = struct.Struct("<32s4xQ")  # an object row's digest and payload offset
_ACT_RECORD = struct.Struct(f"<32s32s{_ACT.size - 64}x")  # an action row's key and record alone
_TOP = struct.Struct(">I")  # a key's first 4 bytes: its bucket in a table's fan-out
_TAG = struct.Struct("=H")  # its next 2: the tag a table holds for each row (native order, as a cast to "H" reads them)
_CHECKSUM = 32
NO_RECORD = bytes(32)
# Past this many segments a writer merges the small ones (size-tiered, like an LSM tree).
COMPACT_AT = 16
LOCK_NAME = "index"
# A lookup that hits looks at index/ again at most this often, so changes of other processes
# (a newer entry, gc's removals) are seen within this delay; a miss always looks.
RECHECK_S = 0.05
MAX_REPLACES = 4096  # names a merge lists as superseded, its inputs' own lists included
# A segment of at most this many rows (a commit's, a small merge's) is held as dicts; a bigger one is read by offset and
# looked up in place. Compaction keeps the small ones few (COMPACT_AT), so the dicts stay a few MB at most.
SMALL_ROWS = 4096
_READ = 1 << 20  # bytes read at a time to hash a segment or copy a merge's rows
DENSE_ROWS = 8  # a sorted run is matched against a table's rows in its range when they are at most this many times it
_STREAM_ROWS = 16384  # rows a pass over a big segment reads at a time (~1 MB)

Loc = tuple[str, int, int]  # pack id, payload offset, payload length


class ActionEntry(NamedTuple):  # a tuple: loading the index makes one per entry, and a tuple is made fastest
    record: bytes | None  # None: the entry was removed (gc, repair)
    time_ns: int
    pack: str
    offset: int


class BadSegmentError(StoreError):
    """An index segment that is truncated, damaged or not a segment."""


@dataclass
class Segment:
    """A segment as dicts: one being written, or a small one read."""

    name: str
    pure: bool = False
    replaces: list[str] = field(default_factory=list)
    objects: dict[bytes, Loc] = field(default_factory=dict)
    actions: dict[bytes, ActionEntry] = field(default_factory=dict)
    # `objects` as encoded rows made ahead (`merged_runs`: the packs by slot, the rows): encode_segment takes them
    object_rows: tuple[list[str], bytes] | None = None
    # `actions` as encoded rows made ahead, sorted by key (gc's kept entries: the packs by slot, the rows), in their own
    # slots: encode_segment re-slots them into the segment's
    action_rows: tuple[list[str], bytes] | None = None

    @property
    def rows(self) -> int:
        return len(self.objects) + len(self.actions)

    def packs(self) -> Iterator[str]:
        yield from (loc[0] for loc in self.objects.values())
        yield from (entry.pack for entry in self.actions.values())

    def iter_objects(self) -> Iterator[tuple[bytes, Loc]]:
        return iter(sorted(self.objects.items()))

    def iter_actions(self) -> Iterator[tuple[bytes, ActionEntry]]:
        return iter(sorted(self.actions.items()))


def merge_action(actions: dict[bytes, ActionEntry], key: bytes, entry: ActionEntry) -> None:
    old = actions.get(key)
    if old is None or entry.time_ns >= old.time_ns:
        actions[key] = entry


def merge_actions(actions: dict[bytes, ActionEntry], more: dict[bytes, ActionEntry]) -> None:
    """merge_action for each of `more`: the keys new to `actions` in one update (most of them, when
    segments are loaded one after another), then the newest entry of each key both hold."""
    common = actions.keys() & more.keys()
    if not common:
        actions.update(more)
        return
    actions.update({key: entry for key, entry in more.items() if key not in common})
    for key in common:
        merge_action(actions, key, more[key])


def encode_segment(segment: Segment) -> bytes:
    return b"".join(encode_segment_parts(segment))


def encode_segment_parts(segment: Segment) -> list[bytes]:
    """`encode_segment`'s bytes as the parts they are made of, its checksum last: written one after another, not joined
    (the whole segment twice more, body then body and checksum: ~70 MB of a gc's peak at 10,000 x 5)."""
    made = segment.object_rows
    slots: dict[str, int] = {} if made is None else {pack: slot for slot, pack in enumerate(made[0])}
    n_objects = len(segment.objects)
    if made is None:
        for pack, _, _ in segment.objects.values():
            slots.setdefault(pack, len(slots))
    elif not segment.objects and len(made[1]) % _OBJ.size == 0:
        n_objects = len(made[1]) // _OBJ.size  # (the rows alone: gc's kept objects, held as rows, not a dict)
    elif len(made[1]) != _OBJ.size * n_objects:
        raise ValueError("a segment's object rows made ahead do not match its objects")
    for entry in segment.actions.values():
        slots.setdefault(entry.pack, len(slots))
    n_actions = len(segment.actions)
    made_actions = segment.action_rows
    if made_actions is not None:
        if segment.actions or len(made_actions[1]) % _ACT.size:
            raise ValueError("a segment's action rows made ahead come with entries, or are torn")
        n_actions = len(made_actions[1]) // _ACT.size
        for pack in made_actions[0]:
            slots.setdefault(pack, len(slots))
    parts = [_HEAD.pack(MAGIC, VERSION, FLAG_PURE if segment.pure else 0, len(segment.replaces), len(slots),
                        n_objects, n_actions)]
    parts += [bytes.fromhex(name) for name in segment.replaces]
    parts += [bytes.fromhex(pack) for pack in slots]
    # Sorted by key alone (sorting the (key, value) pairs costs three times as much), then looked up. The objects' rows
    # are made a column at a time (a pull's one segment names every object it brings: -20 % of the encoding).
    objects, actions = segment.objects, segment.actions
    if made is not None:
        parts.append(made[1])
    else:
        keys = sorted(objects)
        locs = list(map(objects.__getitem__, keys))
        packs = columns.column("I", map(slots.__getitem__, map(_pack_of, locs)))
        offsets, lengths = columns.column("Q", map(_offset_of, locs)), columns.column("Q", map(_length_of, locs))
        parts.append(columns.rows(_OBJ.size, len(keys), b"".join(keys), packs, offsets, lengths))
    parts += [_ACT.pack(key, e.record or NO_RECORD, e.time_ns, slots[e.pack], e.offset)
              for key in sorted(actions) for e in (actions[key],)]
    if made_actions is not None:
        remap = array("I", map(slots.__getitem__, made_actions[0]))
        parts += [_reslot(made_actions[1][at:at + _STREAM_ROWS * _ACT.size], _ACT.size, _SLOT_AT[True], remap,
                          segment.name) for at in range(0, len(made_actions[1]), _STREAM_ROWS * _ACT.size)]
    checksum = blake3.blake3()
    for part in parts:
        checksum.update(part)
    return [*parts, checksum.digest()]


_pack_of, _offset_of, _length_of = itemgetter(0), itemgetter(1), itemgetter(2)  # of a Loc


def object_run(ids: list[bytes], offsets: Iterable[int], lengths: Iterable[int], slot: int) -> list[bytes]:
    """The segment rows of one pack's objects (id, payload offset and length each; ids sorted) in the pack `slot` of
    their segment: made ahead of the commit (a pull's, for each pack as it is checked) for `merged_runs`."""
    n, size = len(ids), _OBJ.size
    whole = bytes(columns.rows(size, n, b"".join(ids), columns.column("I", repeat(slot, n)),
                               columns.column("Q", offsets), columns.column("Q", lengths)))
    return [whole[at:at + size] for at in range(0, len(whole), size)]


def merged_runs(packs: list[str], runs: list[list[bytes]]) -> tuple[list[str], bytes]:
    """`Segment.object_rows` of these packs (slot by slot) and their runs (`object_run`, in those slots; no id in two):
    every row in id order, by a sort of runs sorted each (merged in C, not one Python step per object)."""
    rows: list[bytes] = []
    for run in runs:
        rows += run
    rows.sort()  # (ids are distinct: a row's id decides its place)
    return packs, b"".join(rows)


def decode_segment(name: str, data: bytes, header_only: bool = False) -> Segment:
    where = f"index segment {name}"
    if len(data) < _HEAD.size + _CHECKSUM:
        raise BadSegmentError(f"{where} is truncated")
    magic, version, flags, n_replaces, n_packs, n_objects, n_actions = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise BadSegmentError(f"{where} is not an index segment")
    if version != VERSION:
        raise BadSegmentError(f"{where} has version {version} (this claw reads {VERSION})")
    expected = _HEAD.size + 16 * (n_replaces + n_packs) + _OBJ.size * n_objects + _ACT.size * n_actions
    if header_only:
        if len(data) < _HEAD.size + 16 * n_replaces:
            raise BadSegmentError(f"{where} is truncated")
    elif len(data) != expected + _CHECKSUM:
        raise BadSegmentError(f"{where} has {len(data)} bytes, its header says {expected + _CHECKSUM}")
    pos = _HEAD.size
    replaces = [data[pos + 16 * i:pos + 16 * (i + 1)].hex() for i in range(n_replaces)]
    segment = Segment(name, bool(flags & FLAG_PURE), replaces)
    if header_only:
        return segment
    view = memoryview(data)
    if blake3.blake3(view[:-_CHECKSUM]).digest() != data[-_CHECKSUM:]:
        raise BadSegmentError(f"{where} is damaged (checksum mismatch)")
    pos += 16 * n_replaces
    packs = [data[pos + 16 * i:pos + 16 * (i + 1)].hex() for i in range(n_packs)]
    pos += 16 * n_packs
    end = pos + _OBJ.size * n_objects
    try:
        segment.objects = {digest: (packs[slot], offset, length)
                           for digest, slot, offset, length in _OBJ.iter_unpack(view[pos:end])}
        rows = _ACT.iter_unpack(view[end:-_CHECKSUM])
        segment.actions = {key: ActionEntry(None if record == NO_RECORD else record, time_ns, packs[slot], offset)
                           for key, record, time_ns, slot, offset in rows}
        if len(segment.actions) != n_actions:  # a key twice in one segment (claw writes none): newest wins
            segment.actions = {}
            for key, record, time_ns, slot, offset in _ACT.iter_unpack(view[end:-_CHECKSUM]):
                merge_action(segment.actions, key, ActionEntry(None if record == NO_RECORD else record, time_ns,
                                                               packs[slot], offset))
    except IndexError:
        raise BadSegmentError(f"{where} names a pack slot it does not have") from None
    return segment


def new_segment_name() -> str:
    return os.urandom(16).hex()


def list_segments(index_dir: Path) -> list[str]:
    try:
        names = os.listdir(index_dir)
    except FileNotFoundError:  # removed by hand: an empty index (fsck says so and rebuilds it)
        return []
    return sorted(name[:-len(SUFFIX)] for name in names if name.endswith(SUFFIX) and len(name) == 32 + len(SUFFIX))


def segment_path(index_dir: Path, name: str) -> Path:
    return index_dir / (name + SUFFIX)


def write_segment(index_dir: Path, tmp_dir: Path, segment: Segment) -> None:
    """Publish a segment atomically and durably (temp, fsync, rename, fsync of index/)."""
    write_file_atomic(segment_path(index_dir, segment.name), encode_segment_parts(segment), tmp_dir)


def write_rows_segment(index_dir: Path, tmp_dir: Path, name: str, replaces: list[str], packs: list[str],
                       objects: tuple[int, Iterable[bytes]], actions: tuple[int, Iterable[bytes]]) -> None:
    """Publish a segment (not pure) whose rows come ready, as `write_segment` does: `objects` and `actions` each (how
    many rows, their batches: sorted by key, in the slots of `packs`), read as they are written (gc's, held in a
    temporary file until now)."""
    write_file_atomic(segment_path(index_dir, name), segment_parts(replaces, packs, objects, actions), tmp_dir)


def segment_parts(replaces: list[str], packs: list[str], objects: tuple[int, Iterable[bytes]],
                  actions: tuple[int, Iterable[bytes]]) -> Iterator[bytes]:
    """A segment's bytes (not pure) from its rows' batches (`write_rows_segment`), its checksum last, hashed as they
    pass; StoreError if the batches hold other than the rows counted (nothing is then published)."""
    head = b"".join([_HEAD.pack(MAGIC, VERSION, 0, len(replaces), len(packs), objects[0], actions[0]),
                     *map(bytes.fromhex, replaces), *map(bytes.fromhex, packs)])
    hasher = blake3.blake3(head)
    yield head
    for (count, batches), stride in ((objects, _OBJ.size), (actions, _ACT.size)):
        made = 0
        for batch in batches:
            hasher.update(batch)
            made += len(batch)
            yield batch
        if made != count * stride:
            raise StoreError(f"a new index segment's rows are {made} bytes, where {count} rows were counted")
    yield hasher.digest()


def read_segment(index_dir: Path, name: str, header_only: bool = False) -> Segment:
    path = segment_path(index_dir, name)
    with open(path, "rb") as fh:
        data = fh.read(_HEAD.size + 4096) if header_only else fh.read()
        if header_only:
            n_replaces = _HEAD.unpack_from(data)[3] if len(data) >= _HEAD.size else 0
            if len(data) < _HEAD.size + 16 * n_replaces:  # (the list it replaces, not the whole segment)
                data += fh.read(_HEAD.size + 16 * n_replaces - len(data))
    if header_only:
        return decode_segment(name, data + bytes(_CHECKSUM), header_only=True)
    return decode_segment(name, data)


class _Head(NamedTuple):
    pure: bool
    replaces: list[str]
    packs: list[str]
    objects_at: int  # where the objects' rows begin
    n_objects: int
    actions_at: int
    n_actions: int


def _parse_head(where: str, data: bytes, size: int) -> _Head:
    """A segment's header, its lists, and where its rows are; BadSegmentError unless `size` is what it says."""
    if size < _HEAD.size + _CHECKSUM:
        raise BadSegmentError(f"{where} is truncated")
    magic, version, flags, n_replaces, n_packs, n_objects, n_actions = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise BadSegmentError(f"{where} is not an index segment")
    if version != VERSION:
        raise BadSegmentError(f"{where} has version {version} (this claw reads {VERSION})")
    objects_at = _HEAD.size + 16 * (n_replaces + n_packs)
    actions_at = objects_at + _OBJ.size * n_objects
    expected = actions_at + _ACT.size * n_actions
    if size != expected + _CHECKSUM:
        raise BadSegmentError(f"{where} has {size} bytes, its header says {expected + _CHECKSUM}")
    pos = _HEAD.size
    replaces = [data[pos + 16 * i:pos + 16 * (i + 1)].hex() for i in range(n_replaces)]
    pos += 16 * n_replaces
    packs = [data[pos + 16 * i:pos + 16 * (i + 1)].hex() for i in range(n_packs)]
    return _Head(bool(flags & FLAG_PURE), replaces, packs, objects_at, n_objects, actions_at, n_actions)


def _fanout(tops: Iterable[tuple[int]], n: int, where: str) -> tuple[array[int], int]:
    """Where each bucket of `n` rows begins, the buckets being their keys' first bits (at most one row a bucket on
    average), and the shift that takes a key's first 4 bytes (`tops`, in row order) to its bucket. Rows out of order
    are refused: lookups rely on it."""
    bits = min(24, n.bit_length())  # (half the buckets or more empty: most misses end there)
    shift = 32 - bits
    counts = array("I", bytes(4 * ((1 << bits) + 1)))
    last = 0
    for (top,) in tops:
        if top < last:
            raise BadSegmentError(f"{where} is not sorted")
        last = top
        counts[(top >> shift) + 1] += 1
    return array("I", accumulate(counts)), shift


_Lookup = tuple[int, "array[int]", int, memoryview]  # where the rows begin, the fan-out, its shift, the rows' tags


class Table:
    """A segment looked up where it lies: its file held open and read by offset (not mapped: the pages a mapping
    touches stay in the process's RSS, a large folio at a time, so a build's RSS grew with the index), its sorted
    rows found by a fan-out over their keys' first bits, and each row's tag (its key's next 2 bytes, held: 2 bytes a
    row), so that only a row whose tag matches is read: a miss (a new object's dedup check, a node's key not yet in
    the cache) reads nothing but by a 1-in-65,536 chance, a hit reads its one row."""

    def __init__(self, name: str, fd: int, head: _Head):
        self.name, self.pure, self.replaces, self.packs = name, head.pure, head.replaces, head.packs
        self._fd, self._head = fd, head
        self._closing = weakref.finalize(self, os.close, fd)  # (when the last reader drops it)
        self.rows = head.n_objects + head.n_actions
        self._objects: _Lookup | None = None  # built on the first lookup
        self._actions: _Lookup | None = None
        self._building = threading.Lock()  # one thread builds a lookup; the others asking meanwhile wait for it

    def close(self) -> None:
        self._closing()

    def _read(self, start: int, end: int) -> bytes:
        data = os.pread(self._fd, end - start, start)
        if len(data) != end - start:
            raise BadSegmentError(f"index segment {self.name} is truncated")
        return data

    def _batches(self, at: int, n: int, stride: int) -> Iterator[bytes]:
        """The `n` rows from byte `at`, read a batch at a time."""
        for first in range(0, n, _STREAM_ROWS):
            yield self._read(at + stride * first, at + stride * min(n, first + _STREAM_ROWS))

    def _stream(self, at: int, n: int, stride: int, row: struct.Struct) -> Iterator[tuple[Any, ...]]:
        """The `n` rows from byte `at` unpacked by `row`, read a batch at a time."""
        for batch in self._batches(at, n, stride):
            yield from row.iter_unpack(batch)
            del batch  # (before the next is read: one batch held at a time)

    def _pack(self, slot: int) -> str:
        try:
            return self.packs[slot]
        except IndexError:
            raise BadSegmentError(f"index segment {self.name} names a pack slot it does not have") from None

    def _lookup(self, actions: bool) -> _Lookup:
        """What a lookup needs: where the rows begin, the fan-out and its shift, the rows' tags (built once, in one
        pass over the rows). Once a segment is new (a merge's), every worker of a build looks it up at once: each
        building its own held a batch of rows, a tag column and a fan-out (~5 MB at 300,000 rows) and did the same
        pass, 16 at once the build's highest RSS (docs/scale/building.md, Session 56)."""
        with self._building:
            built = self._actions if actions else self._objects
            return built if built is not None else self._build_lookup(actions)

    def _build_lookup(self, actions: bool) -> _Lookup:
        head = self._head
        at, n, stride = (head.actions_at, head.n_actions, _ACT.size) if actions else \
            (head.objects_at, head.n_objects, _OBJ.size)
        top, column = struct.Struct(f">I{stride - 4}x"), bytearray(_TAG.size * n)  # (made once: no regrowth)

        def tops() -> Iterator[tuple[int]]:
            done = 0
            for batch in self._batches(at, n, stride):
                rows = len(batch) // stride  # bytes 4 and 5 of each row into the column, in C
                column[2 * done:2 * (done + rows):2], column[2 * done + 1:2 * (done + rows):2] = \
                    batch[4::stride], batch[5::stride]
                done += rows
                yield from top.iter_unpack(batch)
                del batch  # (as in _stream)

        tags = memoryview(column).cast("H")
        lookup = (at, *_fanout(tops(), n, f"index segment {self.name}"), tags)
        if actions:
            self._actions = lookup
        else:
            self._objects = lookup
        return lookup

    def object_at(self, digest: bytes, start: int) -> Loc | None:
        """The object if the row at byte `start` is its row (one read of the row)."""
        row = self._read(start, start + _OBJ.size)
        if not row.startswith(digest):
            return None  # (a row whose tag is the same: 1 in 65,536)
        _, slot, offset, length = _OBJ.unpack(row)
        return self._pack(slot), offset, length

    def action_at(self, key: bytes, start: int) -> ActionEntry | None:
        """The entry if the row at byte `start` is one of `key` (one read of the row)."""
        row = self._read(start, start + _ACT.size)
        if not row.startswith(key):
            return None
        _, record, time_ns, slot, offset = _ACT.unpack(row)
        return ActionEntry(record if record != NO_RECORD else None, time_ns, self._pack(slot), offset)

    def check(self) -> None:
        """BadSegmentError unless its rows are sorted and name only the packs it lists (fsck; lookups find it out
        only when they reach such a row)."""
        head = self._head
        tables = ((head.objects_at, head.n_objects, _OBJ.size, 32), (head.actions_at, head.n_actions, _ACT.size, 72))
        for actions, (at, n, stride, slot_at) in enumerate(tables):
            with self._building:
                self._build_lookup(bool(actions))  # (the fan-out, built again: it refuses rows out of order)
            slots = self._stream(at, n, stride, struct.Struct(f"<{slot_at}xI{stride - slot_at - 4}x"))
            if max(map(itemgetter(0), slots), default=-1) >= len(self.packs):
                raise BadSegmentError(f"index segment {self.name} names a pack slot it does not have")

    def iter_objects(self) -> Iterator[tuple[bytes, Loc]]:
        head, pack = self._head, self._pack
        for digest, slot, offset, length in self._stream(head.objects_at, head.n_objects, _OBJ.size, _OBJ):
            yield digest, (pack(slot), offset, length)

    def add_object_digests(self, into: set[bytes]) -> None:
        """Every object digest of the segment added to `into`, cut from its rows in C (no Loc, no merge: a set)."""
        head = self._head
        for batch in self._batches(head.objects_at, head.n_objects, _OBJ.size):
            into.update(map(itemgetter(0), _OBJ_DIGEST.iter_unpack(batch)))

    def key_records(self) -> dict[bytes, bytes]:
        """{key: record} of every action row of the segment (NO_RECORD for a removal), cut from its rows in C."""
        head, found = self._head, {}
        for batch in self._batches(head.actions_at, head.n_actions, _ACT.size):
            found.update(_ACT_RECORD.iter_unpack(batch))
        return found

    def iter_actions(self) -> Iterator[tuple[bytes, ActionEntry]]:
        head, pack = self._head, self._pack
        for key, record, time_ns, slot, offset in self._stream(head.actions_at, head.n_actions, _ACT.size, _ACT):
            yield key, ActionEntry(None if record == NO_RECORD else record, time_ns, pack(slot), offset)

    def to_segment(self) -> Segment:
        segment = Segment(self.name, self.pure, self.replaces, dict(self.iter_objects()))
        for key, entry in self.iter_actions():
            merge_action(segment.actions, key, entry)
        return segment


def open_table(index_dir: Path, name: str, verify: bool = True) -> Table:
    """Open a segment to be read in place (`verify`: its checksum checked first). A merge or gc may remove the file
    meanwhile: the open file stays readable."""
    where = f"index segment {name}"
    fd = os.open(segment_path(index_dir, name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size < _HEAD.size + _CHECKSUM:
            raise BadSegmentError(f"{where} is truncated")
        n_replaces, n_packs = _HEAD.unpack(os.pread(fd, _HEAD.size, 0))[3:5]
        head = _parse_head(where, os.pread(fd, min(size, _HEAD.size + 16 * (n_replaces + n_packs)), 0), size)
        if verify:
            hasher, pos, end = blake3.blake3(), 0, size - _CHECKSUM
            while pos < end:
                chunk = os.pread(fd, min(_READ, end - pos), pos)
                if not chunk:
                    raise BadSegmentError(f"{where} is truncated")
                hasher.update(chunk)
                pos += len(chunk)
            if hasher.digest() != os.pread(fd, _CHECKSUM, end):
                raise BadSegmentError(f"{where} is damaged (checksum mismatch)")
    except BaseException:
        os.close(fd)
        raise
    return Table(name, fd, head)


Part = Segment | Table


def load_segment(index_dir: Path, name: str) -> Part:
    """A segment as a view holds it: a small one as dicts, a big one read in place."""
    table = open_table(index_dir, name)
    return table.to_segment() if table.rows <= SMALL_ROWS else table


# --- merging sorted streams -------------------------------------------------------------------------------------
def merged_objects(streams: list[Iterator[tuple[bytes, Loc]]]) -> Iterator[tuple[bytes, Loc]]:
    """Sorted streams of objects as one sorted stream, each digest once."""
    if len(streams) == 1:
        yield from streams[0]
        return
    last = None
    for digest, loc in heapq.merge(*streams, key=itemgetter(0)):
        if digest != last:
            last = digest
            yield digest, loc


def merged_actions(streams: list[Iterator[tuple[bytes, ActionEntry]]]) -> Iterator[tuple[bytes, ActionEntry]]:
    """Sorted streams of entries as one sorted stream, each key once with its newest entry."""
    key: bytes | None = None
    entry: ActionEntry | None = None
    for more_key, more in heapq.merge(*streams, key=itemgetter(0)):
        if more_key == key:
            assert entry is not None
            if more.time_ns >= entry.time_ns:
                entry = more
            continue
        if key is not None:
            assert entry is not None
            yield key, entry
        key, entry = more_key, more
    if key is not None:
        assert entry is not None
        yield key, entry


def write_merged(index_dir: Path, tmp_dir: Path, name: str, replaces: list[str], parts: list[Part]) -> Table:
    """Publish the union of `parts` (a pure merge) by a k-way merge of their sorted rows, a batch of each at a time
    (`_merge_rows`): the rows go to an unnamed temp file as they come (memory: a batch per part), then the segment is
    written header first and hashed as it is copied. Returns it opened (a Table)."""
    slots: dict[str, int] = {}
    for part in parts:
        for pack in part.packs() if isinstance(part, Segment) else part.packs:
            slots.setdefault(pack, len(slots))
    with tempfile.TemporaryFile(dir=tmp_dir) as rows:
        n_objects = _merge_rows([_row_batches(part, False, slots) for part in parts], _OBJ.size, False, rows.write)
        n_actions = _merge_rows([_row_batches(part, True, slots) for part in parts], _ACT.size, True, rows.write)
        rows.flush()
        rows.seek(0)
        head = b"".join([_HEAD.pack(MAGIC, VERSION, FLAG_PURE, len(replaces), len(slots), n_objects, n_actions),
                         *map(bytes.fromhex, replaces), *map(bytes.fromhex, slots)])
        hasher = blake3.blake3(head)

        def chunks() -> Iterator[bytes]:
            yield head
            while chunk := rows.read(_READ):
                hasher.update(chunk)
                yield chunk
            yield hasher.digest()

        write_file_atomic(segment_path(index_dir, name), chunks(), tmp_dir)
    return open_table(index_dir, name, verify=False)


_KEY, _FIRST = itemgetter(slice(0, 32)), itemgetter(0)  # a row's digest or action key; a 1-tuple's item
_TIME_NS = struct.Struct("<q")  # an action row's time, at byte 64
_SLOT_AT = {False: 32, True: 72}  # where a row's pack slot is (objects, actions)


def _row_batches(part: Part, actions: bool, slots: dict[str, int]) -> Iterator[bytes]:
    """A part's object (or action) rows in key order, in the merged segment's pack `slots`, a batch at a time: a
    table's read as they lie and their slots rewritten in C (not unpacked and packed again a row at a time)."""
    stride = _ACT.size if actions else _OBJ.size
    if isinstance(part, Segment):  # (held as dicts: small, or an own commit's)
        if actions:
            made = [_ACT.pack(key, e.record or NO_RECORD, e.time_ns, slots[e.pack], e.offset)
                    for key, e in part.iter_actions()]
        else:
            made = [_OBJ.pack(digest, slots[pack], offset, length)
                    for digest, (pack, offset, length) in part.iter_objects()]
        for first in range(0, len(made), _STREAM_ROWS):
            yield b"".join(made[first:first + _STREAM_ROWS])
        return
    head = part._head
    at, n = (head.actions_at, head.n_actions) if actions else (head.objects_at, head.n_objects)
    remap = array("I", map(slots.__getitem__, part.packs))  # (even when the same: a slot it lacks is refused)
    for batch in part._batches(at, n, stride):
        yield _reslot(batch, stride, _SLOT_AT[actions], remap, part.name)


def _reslot(batch: bytes, stride: int, slot_at: int, remap: array[int], name: str) -> bytes:
    """`batch`'s rows with each pack slot s (4 bytes little-endian at `slot_at`) made remap[s], a column at a time."""
    try:
        new = columns.column("I", map(remap.__getitem__, columns.values("I", batch, stride, slot_at)))
    except IndexError:
        raise BadSegmentError(f"index segment {name} names a pack slot it does not have") from None
    out = bytearray(batch)
    for byte in range(4):
        out[slot_at + byte::stride] = new[byte::4]
    return bytes(out)


_ROW_BYTES = {size: struct.Struct(f"{size}s") for size in (_OBJ.size, _ACT.size)}


def _rows_of(batch: bytes, stride: int) -> list[bytes]:
    return list(map(_FIRST, _ROW_BYTES[stride].iter_unpack(batch)))


def _merge_rows(streams: list[Iterator[bytes]], stride: int, actions: bool,
                write: Callable[[bytes], object]) -> int:
    """A k-way merge of sorted streams of row batches, written by `write`; returns how many rows. Each round takes
    every row whose key is below the smallest last key of the batches held and sorts them together (C: no Python step
    a row); the stream whose batch ended at that key reads its next. A key in more than one row (an object in two
    segments, an action key rewritten) keeps one: the first stream's object, the newest entry (`merged_objects`,
    `merged_actions`)."""
    held = [[_rows_of(batch, stride), stream] for stream in streams if (batch := next(stream, None)) is not None]
    written = 0
    while held:
        reading = [rows[-1][:32] for rows, stream in held if stream is not None]
        bound = min(reading) if reading else None
        taken = []
        for part in held:
            rows = part[0]
            cut = len(rows) if bound is None else bisect_left(rows, bound)  # (rows with the key `bound` are above it)
            if cut:
                taken.append(rows[:cut])
                del rows[:cut]
        if taken:
            merged = taken[0] if len(taken) == 1 else sorted(chain.from_iterable(taken))
            keys = list(map(_KEY, merged))
            if any(map(eq, keys, islice(keys, 1, None))):  # (sorted: a key twice is twice in a row)
                merged = _settle(taken, actions)
            write(b"".join(merged))
            written += len(merged)
        for part in held:
            rows, stream = part
            if stream is not None and (not rows or rows[-1][:32] == bound):
                batch = next(stream, None)
                if batch is None:
                    part[1] = None
                else:
                    rows += _rows_of(batch, stride)
        held = [part for part in held if part[0] or part[1] is not None]
    return written


def _settle(taken: list[list[bytes]], actions: bool) -> list[bytes]:
    """Rows of keys in more than one row, in key order (stream order among equal keys), each key once: an object's
    first row, an action key's newest (the later row when as new), as `merged_objects` and `merged_actions` keep."""
    kept: list[bytes] = []
    last = None
    for row in heapq.merge(*taken, key=_KEY):
        key = row[:32]
        if key == last:
            if actions and _TIME_NS.unpack_from(row, 64)[0] >= _TIME_NS.unpack_from(kept[-1], 64)[0]:
                kept[-1] = row
            continue
        last = key
        kept.append(row)
    return kept


# --- what a reader holds ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entries:
    """The entries of the segments a reader holds: the small ones' merged into two dicts, the big ones read in place
    (largest first: an object is most likely there). An object is in one segment (any is right if in more); an
    action key's newest entry wins across all of them."""

    objects: dict[bytes, Loc] = field(default_factory=dict)
    actions: dict[bytes, ActionEntry] = field(default_factory=dict)
    tables: tuple[Table, ...] = ()

    def find_object(self, digest: bytes) -> Loc | None:
        loc = self.objects.get(digest)
        if loc is not None or not self.tables:
            return loc
        top, tag = _TOP.unpack_from(digest)[0], _TAG.unpack_from(digest, 4)[0]
        for table in self.tables:  # (a lookup's hot loop: a row read only when its tag matches)
            at, starts, shift, tags = table._objects or table._lookup(False)
            bucket = top >> shift
            for row in range(starts[bucket], starts[bucket + 1]):
                if tags[row] == tag:
                    loc = table.object_at(digest, at + _OBJ.size * row)
                    if loc is not None:
                        return loc
        return None

    def find_sorted(self, digests: Sequence[bytes]) -> list[Loc | None]:
        """Where each of these objects is (`digests` sorted), as `find_object` answers each. A run dense in a big
        table (the rows between the first's and the last's buckets at most DENSE_ROWS times as many as the run: a
        push's pack of the objects a remote lacks) is matched against those rows read a batch at a time, instead of
        one read per object (about 2 us each)."""
        found: list[Loc | None] = list(map(self.objects.get, digests))
        if not self.tables or not digests:
            return found
        lo, hi = _TOP.unpack_from(digests[0])[0], _TOP.unpack_from(digests[-1])[0]
        sparse = []
        for table in self.tables:
            wanted = {digest: at for at, digest in enumerate(digests) if found[at] is None}
            if not wanted:
                return found
            at, starts, shift, _ = table._objects or table._lookup(False)
            first, end = starts[lo >> shift], starts[(hi >> shift) + 1]
            if end - first > DENSE_ROWS * len(wanted):
                sparse.append(table)  # (looked up one by one below)
                continue
            packs = table.packs
            for batch in table._batches(at + _OBJ.size * first, end - first, _OBJ.size):
                for digest, slot, offset, length in _OBJ.iter_unpack(batch):
                    row = wanted.pop(digest, None)  # (popped: its first row in the table answers, as in find_object)
                    if row is not None:
                        found[row] = (packs[slot] if slot < len(packs) else table._pack(slot)), offset, length
        if not sparse:
            return found
        find = Entries(tables=tuple(sparse)).find_object
        return [loc if loc is not None else find(digest) for loc, digest in zip(found, digests, strict=True)]

    def find_action(self, key: bytes) -> ActionEntry | None:
        """The newest entry, a removed one (record None) included."""
        entry = self.actions.get(key)
        if not self.tables:
            return entry
        top, tag = _TOP.unpack_from(key)[0], _TAG.unpack_from(key, 4)[0]
        for table in self.tables:  # (as in find_object; claw writes a key once a segment, a reader does not rely on it)
            at, starts, shift, tags = table._actions or table._lookup(True)
            bucket = top >> shift
            for row in range(starts[bucket], starts[bucket + 1]):
                if tags[row] == tag:
                    found = table.action_at(key, at + _ACT.size * row)
                    if found is not None and (entry is None or found.time_ns >= entry.time_ns):
                        entry = found
        return entry

    def find_records(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """The record digest of each key's newest entry (None: no entry, or a removed one), as `find_action` answers
        each; where no table is read in place, the dicts are asked in one pass (a pull's keys: not a call each)."""
        if self.tables:
            return [None if entry is None else entry.record for entry in map(self.find_action, keys)]
        return [None if entry is None else entry.record for entry in map(self.actions.get, keys)]

    def object_digests(self) -> set[bytes]:
        """Every object's digest, as `iter_objects` names them (a set: no order, no merge, no Loc each)."""
        found = set(self.objects)
        for table in self.tables:
            table.add_object_digests(found)
        return found

    def entry_digests(self) -> dict[bytes, bytes]:
        """{key: record} of each key's newest entry that has a record (what `iter_actions` names, less removals), each
        table's cut from its rows in C (no ActionEntry, no merge of sorted streams); a key in more than one part,
        rare, is settled by `find_action`."""
        found: dict[bytes, bytes] = {}
        again: set[bytes] = set()
        # One part made at a time and merged (the largest table first, taken as it is): held, the result and one part.
        parts = (self._key_records(table, again) for table in self.tables)
        mine = ({key: entry.record or NO_RECORD for key, entry in self.actions.items()},) if self.actions else ()
        for part in chain(parts, mine):
            if not found:
                found = part
                continue
            again.update(found.keys() & part.keys())
            found.update(part)
        for key in again:
            entry = self.find_action(key)
            found[key] = NO_RECORD if entry is None or entry.record is None else entry.record
        if NO_RECORD in found.values():  # (removed in place: no second dict of them all)
            for key in [key for key, record in found.items() if record == NO_RECORD]:
                del found[key]
        return found

    @staticmethod
    def _key_records(table: Table, again: set[bytes]) -> dict[bytes, bytes]:
        """A table's {key: record}; a key twice in it (claw writes none; a reader does not rely on it) kept its last
        row, not its newest: then each of its keys is settled in `again`."""
        part = table.key_records()
        if len(part) != table._head.n_actions:
            again.update(part)
        return part

    def iter_objects(self) -> Iterator[tuple[bytes, Loc]]:
        """Every object, sorted by digest, streamed from the tables (no dict of them all)."""
        streams = [table.iter_objects() for table in self.tables]
        if self.objects:
            streams.append(iter(sorted(self.objects.items())))
        return merged_objects(streams)

    def iter_actions(self) -> Iterator[tuple[bytes, ActionEntry]]:
        """Every key's newest entry (removed ones included), sorted by key, streamed."""
        streams = [table.iter_actions() for table in self.tables]
        if self.actions:
            streams.append(iter(sorted(self.actions.items())))
        return merged_actions(streams)


def object_rows_size(entries: Entries) -> int:
    """The bytes of the object rows of `entries`' big tables (what HeldObjects would hold of them all)."""
    return sum(_OBJ.size * table._head.n_objects for table in entries.tables)


class HeldObjects:
    """Object look-ups over an Entries with its big tables' object rows read into memory once, while they fit in
    `limit` bytes (the others are looked up in place): for a reader that looks up most of the index (fsck), where the
    read of a bucket per look-up cost more than the look-up itself (2.8 against 1.8 us). Answers what
    `Entries.find_object` answers (an object in more than one table: any of them). `row_of` numbers each big table's
    object rows one after another (`rows` of them): a walk marks an object by its row, a byte each (gc's)."""

    def __init__(self, entries: Entries, limit: int, fanned: bool = True):
        """`fanned`: the tables' fan-outs built now; else on the first `find` or `row_of` (a caller that looks up by
        the held rows themselves, reach_arrays, may never need them: 0.2 s of Python at 473,000 rows)."""
        self._objects = entries.objects
        # (rows, fan-out, shift, table, first row); the fan-out empty until built
        self._held: list[tuple[bytes, array[int], int, Table, int]] = []
        self._rest: list[tuple[Table, int]] = []
        self.rows = 0
        for table in entries.tables:
            n = table._head.n_objects
            size = _OBJ.size * n
            if size > limit or not n:  # (a table without object rows has none to hold: limit 0 holds nothing)
                self._rest.append((table, self.rows))
            else:
                limit -= size
                at = table._head.objects_at
                self._held.append((table._read(at, at + size), array("I"), 0, table, self.rows))
            self.rows += n
        self._fanned = False
        if fanned:
            self._fan_out()
        self._rest_entries = Entries(tables=tuple(table for table, _ in self._rest)) if self._rest else None

    def _fan_out(self) -> None:
        self._held = [(rows, *(table._objects or table._lookup(False))[1:3], table, first)
                      for rows, _, _, table, first in self._held]
        self._fanned = True

    def tables(self) -> list[tuple[str, int, int]]:
        """(name, first row, rows) of each big table, as `row_of` numbers them."""
        return [(table.name, first, table._head.n_objects)
                for table, first in [*((t, f) for _, _, _, t, f in self._held), *self._rest]]

    def find(self, digest: bytes) -> Loc | None:
        loc = self._objects.get(digest)
        if loc is not None:
            return loc
        if not self._fanned:
            self._fan_out()
        top, size = _TOP.unpack_from(digest)[0], _OBJ.size
        for rows, starts, shift, table, _ in self._held:
            bucket = top >> shift
            start, end = starts[bucket] * size, starts[bucket + 1] * size
            found = rows.find(digest, start, end) if start != end else -1
            while found >= 0:
                if found % size == 0:
                    _, slot, offset, length = _OBJ.unpack_from(rows, found)
                    return table._pack(slot), offset, length
                found = rows.find(digest, found + 1, end)  # (the bytes of two fields that happen to spell it)
        return self._rest_entries.find_object(digest) if self._rest_entries is not None else None

    def _rest_row(self, digest: bytes) -> tuple[int, Loc] | None:
        """The row and place of an object of a table not held (the held ones and the small segments already asked)."""
        top, size = _TOP.unpack_from(digest)[0], _OBJ.size
        tag = _TAG.unpack_from(digest, 4)[0]
        for table, first in self._rest:  # (as Entries.find_object: a row read only when its tag matches)
            at, starts, shift, tags = table._objects or table._lookup(False)
            bucket = top >> shift
            for row in range(starts[bucket], starts[bucket + 1]):
                if tags[row] == tag:
                    loc = table.object_at(digest, at + size * row)
                    if loc is not None:
                        return first + row, loc
        return None

    def row_of(self, digest: bytes) -> tuple[int, str] | None:
        """An object's row (as `tables` numbers them; -1: a small segment's object, which has none) and pack, or None
        (no Loc made: a walk asks it of every object it reaches)."""
        loc = self._objects.get(digest)
        if loc is not None:
            return -1, loc[0]
        if not self._fanned:
            self._fan_out()
        top, size = _TOP.unpack_from(digest)[0], _OBJ.size
        for rows, starts, shift, table, first in self._held:
            bucket = top >> shift
            start, end = starts[bucket] * size, starts[bucket + 1] * size
            found = rows.find(digest, start, end) if start != end else -1
            while found >= 0:
                if found % size == 0:
                    slot = _SLOT.unpack_from(rows, found + 32)[0]
                    return first + found // size, (table.packs[slot] if slot < len(table.packs) else table._pack(slot))
                found = rows.find(digest, found + 1, end)
        found_row = self._rest_row(digest) if self._rest else None  # (the held tables asked once, above)
        return None if found_row is None else (found_row[0], found_row[1][0])

    def digest_offset(self, row: int) -> tuple[bytes, int]:
        """The digest and pack offset of the object at `row` (as `row_of` numbers them)."""
        for rows, _, _, _, first in self._held:
            if first <= row < first + len(rows) // _OBJ.size:
                return _DIGEST_OFFSET.unpack_from(rows, (row - first) * _OBJ.size)  # type: ignore[return-value]
        digest, loc = self.at_row(row)
        return digest, loc[1]

    def at_row(self, row: int) -> tuple[bytes, Loc]:
        """The object at `row` (as `row_of` numbers them): its digest and where it is."""
        size = _OBJ.size
        for rows, _, _, table, first in self._held:
            if first <= row < first + len(rows) // size:
                digest, slot, offset, length = _OBJ.unpack_from(rows, (row - first) * size)
                return digest, (table._pack(slot), offset, length)
        for table, first in self._rest:
            if first <= row < first + table._head.n_objects:
                at = table._head.objects_at + (row - first) * size
                digest, slot, offset, length = _OBJ.unpack(table._read(at, at + size))
                return digest, (table._pack(slot), offset, length)
        raise IndexError(row)


class _StreamedItems(ItemsView):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[tuple[bytes, object]]:
        return self._mapping.stream()  # type: ignore[attr-defined, no-any-return]


class _StreamedValues(ValuesView):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[object]:
        return (value for _, value in self._mapping.stream())  # type: ignore[attr-defined]


class _EntriesMap(Mapping[bytes, object]):
    """A read-only mapping over Entries: a lookup per key, iteration by streaming (sorted), len by counting."""

    def __init__(self, entries: Entries):
        self._entries = entries

    def find(self, key: bytes) -> object | None:
        raise NotImplementedError

    def stream(self) -> Iterator[tuple[bytes, object]]:
        raise NotImplementedError

    def __getitem__(self, key: bytes) -> object:
        value = self.find(key)
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: bytes, default: object = None) -> object:  # type: ignore[override]
        value = self.find(key)
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and len(key) == 32 and self.find(key) is not None

    def __iter__(self) -> Iterator[bytes]:
        return (key for key, _ in self.stream())

    def __len__(self) -> int:
        return sum(1 for _ in self.stream())

    def items(self) -> ItemsView:  # type: ignore[type-arg, override]
        return _StreamedItems(self)

    def values(self) -> ValuesView:  # type: ignore[type-arg, override]
        return _StreamedValues(self)


class ObjectsMap(_EntriesMap):
    """digest -> Loc of every object, read in place."""

    def find(self, key: bytes) -> Loc | None:
        return self._entries.find_object(key)

    def stream(self) -> Iterator[tuple[bytes, Loc]]:  # type: ignore[override]
        return self._entries.iter_objects()


class ActionsMap(_EntriesMap):
    """key -> newest ActionEntry (removed ones included), read in place."""

    def find(self, key: bytes) -> ActionEntry | None:
        return self._entries.find_action(key)

    def stream(self) -> Iterator[tuple[bytes, ActionEntry]]:  # type: ignore[override]
        return self._entries.iter_actions()


def _entries_of(parts: Iterable[Part]) -> Entries:
    entries = Entries()
    tables = []
    for part in sorted(parts, key=lambda part: part.name):
        if isinstance(part, Table):
            tables.append(part)
        else:
            entries.objects.update(part.objects)
            merge_actions(entries.actions, part.actions)
    tables.sort(key=lambda table: table.rows, reverse=True)
    return Entries(entries.objects, entries.actions, tuple(tables))


@dataclass(frozen=True)
class IndexSnapshot:
    loaded: frozenset[str]
    entries: Entries
    superseded: frozenset[str] = frozenset()  # skipped: a loaded one replaces them (a killed writer's leftovers)

    @property
    def objects(self) -> ObjectsMap:
        return ObjectsMap(self.entries)

    @property
    def actions(self) -> ActionsMap:
        return ActionsMap(self.entries)


class IndexView:
    """This process's view of every segment, refreshed when a lookup misses.

    `loaded` names the segments the view holds: small ones as dicts, big ones read in place (Entries). Segments that
    vanished (merged by another process) are fine if a pure merge of them was taken in; otherwise (gc rewrote the
    index) the view reloads.
    """

    def __init__(self, index_dir: Path, tmp_dir: Path, locks_dir: Path):
        self.index_dir = index_dir
        self.tmp_dir = tmp_dir
        self.locks_dir = locks_dir
        self._held: dict[str, Part] = {}
        self._entries = Entries()  # replaced whole when a segment leaves (lookups of other threads hold one)
        self.loaded: set[str] = set()
        self._superseded: set[str] = set()
        self.listed = 0  # how many segments the last listing saw
        self._checked_at = time.monotonic()
        self._dir_mtime_ns = 0
        self._lock = threading.RLock()
        self._ready = False
        # Segments this process is writing: a refresh that lists one takes it from memory.
        self._own: dict[str, Segment] = {}

    @property
    def objects(self) -> ObjectsMap:
        """Every object (a mapping read in place: lookups, and iteration streamed in digest order)."""
        return ObjectsMap(self._entries)

    def object_digests(self) -> set[bytes]:
        """Every object's digest (set arithmetic over a whole store: a push's, a pull's)."""
        return self._entries.object_digests()

    def entry_digests(self) -> dict[bytes, bytes]:
        """{key digest: record digest} of every entry (a push's whole store; removed ones left out)."""
        return self._entries.entry_digests()

    @property
    def actions(self) -> ActionsMap:
        """Every key's newest entry, removed ones included (read in place like `objects`)."""
        return ActionsMap(self._entries)

    # --- loading --------------------------------------------------------------------------------
    def ensure_loaded(self) -> None:
        if not self._ready:
            self.refresh()

    def refresh(self, again: int = 3) -> None:
        """Take in segments written since the last look (a listdir when nothing changed)."""
        with self._lock:
            names = list_segments(self.index_dir)
            self.listed = len(names)
            heads: dict[str, Segment] = {}
            vanished = False  # merged away since the listing, which may not name the merge yet
            for name in names:
                if name in self._own:
                    heads[name] = self._own[name]
                elif name not in self.loaded and name not in self._superseded:
                    try:
                        heads[name] = read_segment(self.index_dir, name, header_only=True)
                    except FileNotFoundError:
                        vanished = True
            replaced = {old for head in heads.values() for old in head.replaces}
            rewritten = any(head.replaces and not head.pure for head in heads.values())
            if not rewritten:
                for name, head in heads.items():
                    if name in replaced or name in self.loaded:
                        continue  # a merge listed with it holds its entries; or an own one, taken
                    if name in self._own:
                        self._absorb(self._own[name])
                    else:
                        try:
                            self._absorb(load_segment(self.index_dir, name))
                        except FileNotFoundError:
                            vanished = True
                            continue
                    self._superseded |= set(head.replaces)
            if rewritten or self.loaded - set(names):
                self._reload(names)  # gc or repair rewrote the index: entries may have gone
            self._ready = True
            if vanished and again:  # list again: the merge that holds their entries is there now
                self.refresh(again - 1)

    def _absorb(self, part: Part) -> None:
        """Take in a segment; the ones it replaces leave (a pure merge holds their entries)."""
        self._held[part.name] = part
        self.loaded.add(part.name)
        entries = self._entries
        if isinstance(part, Table):
            tables = sorted((*entries.tables, part), key=lambda table: table.rows, reverse=True)
            self._entries = Entries(entries.objects, entries.actions, tuple(tables))
        else:  # (added in place: other threads' lookups may see them a moment early, never a torn view)
            entries.objects.update(part.objects)
            merge_actions(entries.actions, part.actions)
        gone = [name for name in part.replaces if name in self._held]
        if gone:
            for name in gone:
                del self._held[name]
            self.loaded -= set(gone)
            self._entries = _entries_of(self._held.values())

    def _reload(self, names: list[str]) -> None:
        for _ in range(5):
            try:
                heads = {name: read_segment(self.index_dir, name, header_only=True) for name in names}
                superseded = {old for head in heads.values() for old in head.replaces}
                held = {name: load_segment(self.index_dir, name) for name in names if name not in superseded}
            except FileNotFoundError:  # a merge replaced some of them meanwhile: start over
                names = list_segments(self.index_dir)
                continue
            self._held, self._entries = held, _entries_of(held.values())
            self.loaded, self._superseded = set(held), superseded
            return
        raise StoreError(f"index {self.index_dir} keeps changing; try again")

    def snapshot(self) -> IndexSnapshot:
        """The segments held and their entries, frozen (later refreshes do not change it; the big segments are
        shared, not copied: they never change)."""
        with self._lock:
            entries = self._entries
            return IndexSnapshot(frozenset(self.loaded), Entries(dict(entries.objects), dict(entries.actions),
                                                                 entries.tables), frozenset(self._superseded))

    def reload(self) -> None:
        with self._lock:
            self._reload(list_segments(self.index_dir))
            self._ready = True

    @contextlib.contextmanager
    def publishing(self, segment: Segment) -> Iterator[None]:
        """While this process writes `segment`, a refresh that lists it takes it from memory instead of reading
        it back."""
        with self._lock:
            self._own[segment.name] = segment
        try:
            yield
        finally:
            with self._lock:
                del self._own[segment.name]

    def add_own(self, segment: Segment) -> None:
        """A segment this process just published: take its entries (a big one read in place from the file)."""
        with self._lock:
            if self._ready and segment.name not in self.loaded:
                if segment.rows <= SMALL_ROWS:
                    self._absorb(segment)
                else:
                    with contextlib.suppress(FileNotFoundError):  # merged away already: a refresh finds it
                        self._absorb(open_table(self.index_dir, segment.name, verify=False))
            self.listed += 1

    def _part(self, name: str) -> Part:
        """A segment a merge takes: as this view holds it, else read from index/."""
        with self._lock:
            part = self._held.get(name)
        return part if part is not None else load_segment(self.index_dir, name)

    # --- lookups --------------------------------------------------------------------------------
    def _recheck(self) -> None:
        """Every so often, take in what other processes changed (a hit alone would never look)."""
        now = time.monotonic()
        if now - self._checked_at < RECHECK_S:
            return
        self._checked_at = now
        try:
            mtime_ns = os.stat(self.index_dir).st_mtime_ns
        except FileNotFoundError:
            return
        # Directory timestamps are coarse: a change in the last second may hide behind an equal one.
        if mtime_ns != self._dir_mtime_ns or time.time_ns() - mtime_ns < 1_000_000_000:
            self._dir_mtime_ns = mtime_ns
            self.refresh()

    def find_object(self, digest: bytes, look_again: bool = True) -> Loc | None:
        """Where an object is; on a miss the index is listed again unless `look_again` is False
        (a put's dedup check: writing a copy another process made a moment ago is harmless)."""
        self.ensure_loaded()
        self._recheck()
        loc = self._entries.find_object(digest)
        if loc is None and look_again:
            self.refresh()
            loc = self._entries.find_object(digest)
        return loc

    def find_sorted(self, digests: Sequence[bytes]) -> list[Loc | None]:
        """Where each of these objects (sorted) is, None for one the index does not name (not listed again:
        Entries.find_sorted)."""
        self.ensure_loaded()
        self._recheck()
        return self._entries.find_sorted(digests)

    def lacking(self, digests: Iterable[bytes]) -> list[bytes]:
        """Those of `digests` the index does not name, from one look for the lot (not listed again:
        a caller that cares asks find_object about each of them)."""
        self.ensure_loaded()
        self._recheck()
        find = self._entries.find_object
        return [digest for digest in digests if find(digest) is None]

    def find_action(self, key: bytes, look_again: bool = True) -> ActionEntry | None:
        """The entry for `key`; on a miss the index is listed again unless `look_again` is False (an
        import's check for entries of its own to keep: writing one another process made is harmless)."""
        self.ensure_loaded()
        self._recheck()
        entry = self._entries.find_action(key)
        if (entry is None or entry.record is None) and look_again:
            self.refresh()
            entry = self._entries.find_action(key)
        return entry if entry is not None and entry.record is not None else None

    def find_records(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """`find_action(key, look_again=False)`'s record of each key (None: no entry), for them all at once
        (Entries.find_records)."""
        self.ensure_loaded()
        self._recheck()
        return self._entries.find_records(keys)

    # --- compaction -----------------------------------------------------------------------------
    def maybe_compact(self) -> bool:
        """Merge small segments when there are many; skipped if another process is at it."""
        if self.listed < COMPACT_AT:
            return False
        with index_lock(self.locks_dir, wait=False) as held:
            if not held:
                return False
            names = list_segments(self.index_dir)
            if len(names) < COMPACT_AT:
                return False
            sizes = {}
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    sizes[name] = segment_path(self.index_dir, name).stat().st_size
            chosen = _tier(sizes)
            if len(chosen) < 2:
                return False
            parts = [self._part(name) for name in chosen]
            inherited = [old for part in parts for old in part.replaces]  # a reader that held those holds this
            replaces = chosen + [name for name in dict.fromkeys(inherited) if name not in chosen]
            replaces = replaces[:MAX_REPLACES]  # a reader further behind reloads instead
            merged: Part
            if sum(part.rows for part in parts) <= SMALL_ROWS:  # as dicts, like a commit's
                merged = Segment(new_segment_name(), pure=True, replaces=replaces)
                merged.objects.update(merged_objects([part.iter_objects() for part in parts]))
                merged.actions.update(merged_actions([part.iter_actions() for part in parts]))
                with self.publishing(merged):  # (until taken in: a refresh meanwhile takes it too)
                    write_segment(self.index_dir, self.tmp_dir, merged)
            else:
                merged = write_merged(self.index_dir, self.tmp_dir, new_segment_name(), replaces, parts)
            remove_segments(self.index_dir, chosen)
            with self._lock:  # take the merge as written, not read back (a commit compacts often)
                if self._ready and merged.name not in self.loaded:
                    self._absorb(merged)
                if self._ready:
                    self._superseded |= set(merged.replaces)
        self.refresh()
        return True


def _tier(sizes: dict[str, int]) -> list[str]:
    """The segments to merge: all but the big ones that dwarf everything smaller (size-tiered)."""
    order = sorted(sizes, key=lambda name: sizes[name], reverse=True)
    while len(order) > 1 and sizes[order[0]] > 2 * sum(sizes[name] for name in order[1:]):
        order.pop(0)
    return sorted(order)


def remove_segments(index_dir: Path, names: Iterable[str]) -> None:
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(segment_path(index_dir, name))
    fsync_path(index_dir)


@contextlib.contextmanager
def index_lock(locks_dir: Path, wait: bool = True):  # type: ignore[no-untyped-def]
    """The lock that serialises index rewrites (merges, gc, repair); yields whether it is held."""
    fd = os.open(locks_dir / f"{LOCK_NAME}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
