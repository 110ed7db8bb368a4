"""The index: object id -> (pack, offset, length) and action key -> record, in immutable segments that are merged as
they accumulate. Byte layout, lookup and merge rules: docs/store.md (Index)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import blake3

from clawstore.errors import StoreError
from clawstore.host.durable import fsync_path, write_file_atomic

MAGIC = b"CLAWIDX\x00"
VERSION = 1
FLAG_PURE = 1
SUFFIX = ".idx"
_HEAD = struct.Struct("<8sIIIIQQ")
_OBJ = struct.Struct("<32sIQQ")
_ACT = struct.Struct("<32s32sqIQ")
_CHECKSUM = 32
NO_RECORD = bytes(32)
# Past this many segments a writer merges the small ones (size-tiered, like an LSM tree).
COMPACT_AT = 16
LOCK_NAME = "index"
# A lookup that hits looks at index/ again at most this often, so changes of other processes
# (a newer entry, gc's removals) are seen within this delay; a miss always looks.
RECHECK_S = 0.05
MAX_REPLACES = 4096  # names a merge lists as superseded, its inputs' own lists included
# Entries of the segments this process wrote that it keeps for its next merge (a few MB of dict slots:
# the entries themselves are the view's); a bigger segment is read back when a merge takes it.
HELD_ENTRIES = 100_000

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
    name: str
    pure: bool = False
    replaces: list[str] = field(default_factory=list)
    objects: dict[bytes, Loc] = field(default_factory=dict)
    actions: dict[bytes, ActionEntry] = field(default_factory=dict)


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
    slots: dict[str, int] = {}
    for pack, _, _ in segment.objects.values():
        slots.setdefault(pack, len(slots))
    for entry in segment.actions.values():
        slots.setdefault(entry.pack, len(slots))
    parts = [_HEAD.pack(MAGIC, VERSION, FLAG_PURE if segment.pure else 0, len(segment.replaces), len(slots),
                        len(segment.objects), len(segment.actions))]
    parts += [bytes.fromhex(name) for name in segment.replaces]
    parts += [bytes.fromhex(pack) for pack in slots]
    # Sorted by key alone (sorting the (key, value) pairs costs three times as much), then looked up.
    objects, actions = segment.objects, segment.actions
    parts += [_OBJ.pack(digest, slots[loc[0]], loc[1], loc[2])
              for digest in sorted(objects) for loc in (objects[digest],)]
    parts += [_ACT.pack(key, e.record or NO_RECORD, e.time_ns, slots[e.pack], e.offset)
              for key in sorted(actions) for e in (actions[key],)]
    body = b"".join(parts)
    return body + blake3.blake3(body).digest()


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
    return secrets.token_hex(16)


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
    write_file_atomic(segment_path(index_dir, segment.name), encode_segment(segment), tmp_dir)


def read_segment(index_dir: Path, name: str, header_only: bool = False) -> Segment:
    path = segment_path(index_dir, name)
    with open(path, "rb") as fh:
        data = fh.read(_HEAD.size + 4096) if header_only else fh.read()
    if header_only:
        n_replaces = _HEAD.unpack_from(data)[3] if len(data) >= _HEAD.size else 0
        if len(data) < _HEAD.size + 16 * n_replaces:
            data = path.read_bytes()
        return decode_segment(name, data + bytes(_CHECKSUM), header_only=True)
    return decode_segment(name, data)


@dataclass(frozen=True)
class IndexSnapshot:
    loaded: frozenset[str]
    objects: dict[bytes, Loc]
    actions: dict[bytes, ActionEntry]
    superseded: frozenset[str] = frozenset()  # skipped: a loaded one replaces them (a killed writer's leftovers)


class IndexView:
    """This process's merged view of every segment, refreshed when a lookup misses.

    `loaded` names the segments the view holds. Segments that vanished (merged by another process)
    are fine if a pure merge of them was adopted; otherwise (gc rewrote the index) the view reloads.
    """

    def __init__(self, index_dir: Path, tmp_dir: Path, locks_dir: Path):
        self.index_dir = index_dir
        self.tmp_dir = tmp_dir
        self.locks_dir = locks_dir
        self.objects: dict[bytes, Loc] = {}
        self.actions: dict[bytes, ActionEntry] = {}
        self.loaded: set[str] = set()
        self._superseded: set[str] = set()
        self.listed = 0  # how many segments the last listing saw
        self._checked_at = time.monotonic()
        self._dir_mtime_ns = 0
        self._lock = threading.RLock()
        self._ready = False
        # Segments this process is writing -> the segments whose union they are (None: new entries). A
        # refresh listing one takes it from memory, and a merge of segments already held adds nothing.
        self._own: dict[str, tuple[Segment, list[str] | None]] = {}
        # Segments this process wrote, by name, for its merges to take instead of reading them back: a
        # name is written once and never changed (gc and repair write new names), so the file holds these.
        self._written: dict[str, Segment] = {}
        self._written_entries = 0

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
                    heads[name] = self._own[name][0]
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
                        self._absorb(*self._own[name])
                    else:
                        try:
                            self._absorb(read_segment(self.index_dir, name))
                        except FileNotFoundError:
                            vanished = True
                            continue
                    self._superseded |= set(head.replaces)
            if rewritten or self.loaded - set(names):
                self._reload(names)  # gc or repair rewrote the index: entries may have gone
            self._ready = True
            if vanished and again:  # list again: the merge that holds their entries is there now
                self.refresh(again - 1)

    def _absorb(self, segment: Segment, union_of: list[str] | None = None) -> None:
        """Take in a segment's entries; none when it is the union of segments this view holds (`union_of`:
        a merge this process wrote): their entries, or newer ones, are here already."""
        if union_of is None or not self.loaded.issuperset(union_of):
            self.objects.update(segment.objects)
            merge_actions(self.actions, segment.actions)
        self.loaded.add(segment.name)
        self.loaded -= set(segment.replaces)

    def _reload(self, names: list[str]) -> None:
        self.objects, self.actions, self.loaded, self._superseded = {}, {}, set(), set()
        for _ in range(5):
            try:
                for name in names:
                    if name not in self.loaded:
                        segment = read_segment(self.index_dir, name)
                        self._absorb(segment)
                        self._superseded |= set(segment.replaces)
                return
            except FileNotFoundError:  # a merge replaced some of them meanwhile: start over
                self.objects, self.actions, self.loaded = {}, {}, set()
                names = list_segments(self.index_dir)
        raise StoreError(f"index {self.index_dir} keeps changing; try again")

    def snapshot(self) -> IndexSnapshot:
        """The segments held and their entries, frozen (later refreshes do not change it)."""
        with self._lock:
            return IndexSnapshot(frozenset(self.loaded), dict(self.objects), dict(self.actions),
                                 frozenset(self._superseded))

    def reload(self) -> None:
        with self._lock:
            self._reload(list_segments(self.index_dir))
            self._ready = True

    @contextlib.contextmanager
    def publishing(self, segment: Segment, union_of: list[str] | None = None) -> Iterator[None]:
        """While this process writes `segment` (`union_of`: the segments it merges), a refresh that lists
        it takes it from memory instead of reading it back."""
        with self._lock:
            self._own[segment.name] = (segment, union_of)
        try:
            yield
        finally:
            with self._lock:
                del self._own[segment.name]

    def add_own(self, segment: Segment, union_of: list[str] | None = None) -> None:
        """A segment this process just published: take its entries without reading the file back."""
        with self._lock:
            if self._ready and segment.name not in self.loaded:
                self._absorb(segment, union_of)
            self.listed += 1
            self._hold(segment)

    def _hold(self, segment: Segment) -> None:
        """Keep a segment this process wrote for its next merge, within HELD_ENTRIES."""
        size = len(segment.objects) + len(segment.actions)
        if self._written_entries + size <= HELD_ENTRIES:
            self._written[segment.name] = segment
            self._written_entries += size

    def _release(self, names: Iterable[str]) -> None:
        """Forget held segments (merged away: no merge lists them again)."""
        for name in names:
            segment = self._written.pop(name, None)
            if segment is not None:
                self._written_entries -= len(segment.objects) + len(segment.actions)

    def _part(self, name: str) -> Segment:
        """A segment a merge takes: as this process wrote it, else read from index/."""
        with self._lock:
            segment = self._written.get(name)
        return segment if segment is not None else read_segment(self.index_dir, name)

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
        loc = self.objects.get(digest)
        if loc is None and look_again:
            self.refresh()
            loc = self.objects.get(digest)
        return loc

    def lacking(self, digests: Iterable[bytes]) -> list[bytes]:
        """Those of `digests` the index does not name, from one look for the lot (not listed again:
        a caller that cares asks find_object about each of them)."""
        self.ensure_loaded()
        self._recheck()
        objects = self.objects
        return [digest for digest in digests if digest not in objects]

    def find_action(self, key: bytes, look_again: bool = True) -> ActionEntry | None:
        """The entry for `key`; on a miss the index is listed again unless `look_again` is False (an
        import's check for entries of its own to keep: writing one another process made is harmless)."""
        self.ensure_loaded()
        self._recheck()
        entry = self.actions.get(key)
        if (entry is None or entry.record is None) and look_again:
            self.refresh()
            entry = self.actions.get(key)
        return entry if entry is not None and entry.record is not None else None

    # --- compaction -----------------------------------------------------------------------------
    def maybe_compact(self) -> bool:
        """Merge small segments when there are many; skipped if another process is at it."""
        if self.listed < COMPACT_AT:
            return False
        with index_lock(self.locks_dir, wait=False) as held:
            if not held:
                return False
            names = list_segments(self.index_dir)
            with self._lock:  # merged away or removed by another process: never listed again
                self._release(set(self._written) - set(names))
            if len(names) < COMPACT_AT:
                return False
            sizes = {}
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    sizes[name] = segment_path(self.index_dir, name).stat().st_size
            chosen = _tier(sizes)
            if len(chosen) < 2:
                return False
            merged = Segment(new_segment_name(), pure=True)
            inherited: list[str] = []
            for name in chosen:
                part = self._part(name)
                inherited += part.replaces  # a reader that held those still holds this merge's entries
                merged.objects.update(part.objects)
                merge_actions(merged.actions, part.actions)
            merged.replaces = chosen + [name for name in dict.fromkeys(inherited) if name not in chosen]
            merged.replaces = merged.replaces[:MAX_REPLACES]  # a reader further behind reloads instead
            with self.publishing(merged, chosen):  # (until taken in: a refresh meanwhile takes it too)
                write_segment(self.index_dir, self.tmp_dir, merged)
                remove_segments(self.index_dir, chosen)
                with self._lock:  # take the merge as written, not read back (a commit compacts often)
                    if self._ready and merged.name not in self.loaded:
                        self._absorb(merged, chosen)
                    if self._ready:
                        self._superseded |= set(merged.replaces)
                    self._release(chosen)
                    self._hold(merged)
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
