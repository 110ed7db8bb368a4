"""Packs as the unit of transfer between stores (`claw push` / `claw pull`): made, verified and adopted whole.

How packs are chosen, checked and taken in: docs/remote.md (Details by module)."""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import mmap
import operator
import os
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import accumulate, compress, repeat
from operator import add, itemgetter, sub
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from clawstore.errors import CorruptObjectError, UsageError
from clawstore.host.durable import fsync_path
from clawstore.store.actions import entry_record, set_entries, takes_over
from clawstore.store.core import codec, index
from clawstore.store.core.batch import Pending, commit
from clawstore.store.core.ids import PREFIX, file_digest
from clawstore.store.core.objects import BlobFile
from clawstore.store.core.packfile import (
    KIND_OBJECT,
    TABLE_ROW_SIZE,
    Blob,
    NotAPackError,
    PackCheckError,
    PackWriter,
    iter_pack_ids,
    pack_path,
    scan_pack,
    sealed_object_ids,
    writer_alive,
)
from clawstore.store.core.packmaps import PackMaps

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore
    from clawstore.store.services.archive_verify import FrameSource, Kept

COPY_BYTES = 1 << 20  # a received pack's frames are copied in runs of about this many bytes (memory: one run)
# A received pack this big moves in whole; a smaller one's objects are copied (about 1.2 us an object, 3 before session
# 52: a pack of 1 MiB, some 6,000 objects of claw's, costs more to copy than a file of its own until gc merges it).
ADOPT_BYTES = 1 << 20
SMALL_MAX = codec.BATCH_MAX  # frames up to this size are copied whole while making a pack; larger ones stream
_BATCH_BYTES = 16 << 20  # decoded bytes per batch call: bounds memory whatever the pack holds (docs/remote.md, Scale)
_APPEND_BYTES = 8 << 20  # frames copied per write while making a pack
_blob_id, _blob_offset, _blob_length = itemgetter(1), itemgetter(2), itemgetter(3)  # a Blob's fields (a tuple)
_blob_span = itemgetter(2, 3)  # a Blob's (offset, length)
_digest = blake3.blake3.digest  # (mapped over hashers: no Python call per object)
_digest_hex = itemgetter(slice(len(PREFIX), None))  # an object id's hex digest


# ------------------------------------------------------------------------------------------ sending

@dataclass(frozen=True)
class SealedPack:
    """One of the store's own sealed packs, as a push sends it: its file and its objects (table order)."""

    pack_id: str
    path: Path
    objects: list[bytes]  # digests


def sealed_packs(store: ObjectStore, skip: Container[str]) -> Iterator[SealedPack]:
    """The store's sealed packs not in `skip`, largest first (the longest upload starts first, so the last
    one to end is not a big pack whose table happened to be read last). Packs a live writer still
    writes, unsealed ones (a killed writer's: their objects go copied) and those gone meanwhile are
    left out."""
    packs_dir = store.runtime.packs_dir
    for pack_id in _largest_first(packs_dir, skip):
        path = pack_path(packs_dir, pack_id)
        try:
            if writer_alive(path):
                continue
            ids = list(dict.fromkeys(sealed_object_ids(path)))  # in table order (sorting costs more than it tells)
        except (NotAPackError, OSError):
            continue
        yield SealedPack(pack_id, path, ids)


def _largest_first(packs_dir: Path, skip: Container[str]) -> list[str]:
    sizes = {}
    for pack_id in iter_pack_ids(packs_dir) if packs_dir.is_dir() else ():
        if pack_id not in skip:
            with contextlib.suppress(OSError):
                sizes[pack_id] = pack_path(packs_dir, pack_id).stat().st_size
    return sorted(sizes, key=sizes.__getitem__, reverse=True)


# ------------------------------------------------------------------------------------------ making

def make_pack(store: ObjectStore, digests: Iterable[bytes], work: Path, content: bytes | None = None) -> Path:
    """A sealed pack in `work` holding the frames of these objects, in id order, then one object given
    by its `content` (not taken from the store): the same objects always make the same bytes, so a
    push run again after a kill makes (and skips) the same name."""
    writer = PackWriter(work)
    maps = PackMaps(store)
    try:
        ids: list[bytes] = []  # the frames to append next, and their objects
        frames: list[bytes | memoryview] = []
        held = 0
        ordered = _sorted_unique(digests)
        # Committed objects, found together: a dense run's index rows are read in one pass, not one read each.
        found = store.runtime.index.find_sorted(ordered)
        mapped: dict[str, memoryview] = {}  # pack -> its mapped bytes: a frame is a slice
        for digest, loc in zip(ordered, found, strict=True):
            view = None
            if loc is not None:
                pack, at, length = loc
                end = at + length
                whole = mapped.get(pack)
                if whole is None or len(whole) < end:
                    try:
                        whole = mapped[pack] = maps.whole(pack, end)
                    except FileNotFoundError:  # its pack was replaced by gc a moment ago
                        whole = None
                if whole is not None:
                    view = whole[at:end]
            if view is None:  # (not committed yet, or moved: the full lookup)
                (_, _, length), view = _frame(store, maps, digest)
            if length > SMALL_MAX:  # streamed in chunks: memory stays bounded
                writer.append_objects(ids, frames)
                ids, frames, held = [], [], 0
                start = writer.begin_stream(KIND_OBJECT)
                for offset in range(0, length, codec.CHUNK):
                    writer.write_raw(view[offset:offset + codec.CHUNK])
                writer.end_stream(start, KIND_OBJECT, digest)
                continue
            ids.append(digest)
            frames.append(view)
            held += length
            if held >= _APPEND_BYTES:
                writer.append_objects(ids, frames)
                ids, frames, held = [], [], 0
        writer.append_objects(ids, frames)
        ids, frames = [], []  # (views of the mapped packs go before the maps close)
        if content is not None:
            writer.append_many([(KIND_OBJECT, blake3.blake3(content).digest(), codec.encode(content, store.level))])
        mapped.clear()
        writer.seal(durable=False)  # (sent, then deleted: nothing in the store names it)
    except BaseException:
        writer.close()
        writer.path.unlink(missing_ok=True)
        raise
    finally:
        maps.close()
    writer.close()
    return writer.path


def _sorted_unique(digests: Iterable[bytes]) -> list[bytes]:
    """`digests` in id order, each once. Push hands them over sorted: sorting a sorted list is one pass, where sorting a
    set (hash order) took 10-15 ms a pack of 20,000."""
    ordered = sorted(digests)
    if len(set(ordered)) != len(ordered):
        ordered = sorted(set(ordered))
    return ordered


def _frame(store: ObjectStore, maps: PackMaps, digest: bytes) -> tuple[tuple[str, int, int], memoryview]:
    """Where an object's frame is and its bytes (mapped); located again once if gc moved it."""
    for attempt in range(2):
        loc = store.locate_digest(digest)
        if loc is not None:
            try:
                return loc, maps.read(loc, loc[2], 0)
            except FileNotFoundError:  # its pack was replaced by gc a moment ago
                store.runtime.forget_pack(loc[0])
        if attempt:
            break
        store.runtime.index.reload()
    raise UsageError(f"cannot push: object {PREFIX}{digest.hex()} vanished from the store (run claw fsck)")


# ------------------------------------------------------------------------------------------ checking

def verify_pack(path: Path, name: str, where: str, keep: AbstractSet[bytes] = frozenset(),
                kept: Kept | None = None) -> list[Blob]:
    """Check a received pack whole; its object blobs. PackCheckError naming `where` if anything is off.
    The decoded content of the objects in `keep` (digests) is put in `kept` (by hex id), as far as it
    has room: the caller reads them next (the others from the pack: ReceivedPack)."""
    return verify_received(path, name, where, keep, kept, {})[0]


def verify_received(path: Path, name: str, where: str, keep: AbstractSet[bytes], kept: Kept | None,
                    unkept: dict[str, Blob]) -> tuple[list[Blob], bytes]:
    """`verify_pack`, also giving the pack's table (checksum verified: the rows its blobs were read from) and putting
    in `unkept` (by hex id) the objects in `keep` that `kept` had no room for, found in the same walk of the blobs
    that decodes and hashes them (not in a second walk over the pack's blobs)."""
    if file_digest(path) != name:
        raise PackCheckError(f"{where}: its bytes do not hash to its name (damaged in transit or on the remote)")
    try:
        scan = scan_pack(path)
    except NotAPackError as exc:
        raise PackCheckError(f"{where}: {exc}") from None
    if not scan.sealed or scan.table is None:
        raise PackCheckError(f"{where}: not a sealed pack")
    objects = _objects(scan.blobs, scan.table)
    picks = _Picks(keep, kept, unkept)
    with open(path, "rb") as fh:
        if scan.size == 0:
            return objects, scan.table
        # what its frames may decode to, all together (a decompression bomb is refused before, or as, it is decoded)
        room = codec.content_bound(scan.size)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                large, room = _verify_small(mapped, view, objects, where, picks, room)
                for blob in large:  # (bigger than anything kept)
                    room -= _verify_streaming(fh.fileno(), blob, where, room, scan.size)
                picks.not_kept(large)
            finally:
                view.release()
    return objects, scan.table


def _objects(blobs: list[Blob], table: bytes) -> list[Blob]:
    """The object blobs of a pack's, by its table (the rows they were made from): all of them, found in one slice of
    its rows' kinds, when it holds no entries (as a pushed pack)."""
    if not table[::TABLE_ROW_SIZE].translate(None, bytes([KIND_OBJECT])):
        return blobs
    return [blob for blob in blobs if blob.kind == KIND_OBJECT]


@dataclass(frozen=True)
class _Picks:
    """Where the contents of the objects a pull's entry checks read next go as they are verified: decoded in `kept`
    as far as it has room, else named in `unkept` (to be read back from the pack)."""

    keep: AbstractSet[bytes]
    kept: Kept | None
    unkept: dict[str, Blob]

    def take(self, ids: list[bytes], blobs: list[Blob], decoded: Sequence[bytes | memoryview]) -> None:
        if not self.keep:
            return
        kept = self.kept
        picked = list(compress(range(len(ids)), map(self.keep.__contains__, ids)))  # (those kept only)
        contents = list(map(decoded.__getitem__, picked))
        sizes = list(map(len, contents))
        if kept is not None and kept.reserve_all(sizes):  # (as a pull's records mostly are: kept in C, no step each)
            kept.contents.update(zip(map(bytes.hex, map(ids.__getitem__, picked)), map(bytes, contents), strict=True))
            return
        for at in picked:
            content, hexdigest = decoded[at], ids[at].hex()
            if kept is not None and kept.reserve(len(content)):
                kept.contents[hexdigest] = bytes(content)
            elif kept is None or hexdigest not in kept.contents:
                self.unkept[hexdigest] = blobs[at]

    def not_kept(self, blobs: list[Blob]) -> None:
        """These verified objects' contents were not decoded whole (streamed, or checked one by one)."""
        if not self.keep:
            return
        contents = {} if self.kept is None else self.kept.contents
        for blob in compress(blobs, map(self.keep.__contains__, map(_blob_id, blobs))):
            if blob.id.hex() not in contents:
                self.unkept[blob.id.hex()] = blob


def _verify_small(mapped: mmap.mmap, view: memoryview, objects: list[Blob], where: str, picks: _Picks,
                  room: int) -> tuple[list[Blob], int]:
    """Verify the frames that declare a small content size, in batches of about _BATCH_BYTES, if all of them together
    declare at most `room` bytes; (the others, to be streamed; the room left). The sizes are read, and the batches cut,
    without a Python step per frame (20 ms of a pull's 60,000)."""
    sizes = codec.declared_sizes(mapped, map(_blob_offset, objects))
    if sizes is None:  # (a header that is no frame's: each asked, the bad one streamed, to be named)
        sizes = [codec.batch_size(view[blob.offset:blob.offset + codec.MAX_HEADER]) for blob in objects]
    fits = list(map(codec.batched, sizes))
    small, large = list(compress(objects, fits)), list(compress(objects, map(operator.not_, fits)))
    totals = list(accumulate(compress(sizes, fits)))
    if totals and totals[-1] > room:
        raise PackCheckError(f"{where}: {codec.bomb_text(room)}")
    start, before = 0, 0
    while start < len(small):  # (a batch ends at the frame that brings it to _BATCH_BYTES, as one added each did)
        end = min(bisect.bisect_left(totals, before + _BATCH_BYTES, lo=start) + 1, len(small))
        _verify_batch(mapped, view, small[start:end], where, picks, totals[end - 1] - before)
        start, before = end, totals[end - 1]
    return large, room - (totals[-1] if totals else 0)


def _verify_batch(mapped: mmap.mmap, view: memoryview, batch: list[Blob], where: str, picks: _Picks,
                  held: int) -> None:
    """`held`: the content bytes the batch's frames declare (a small batch is decoded without threads:
    starting them costs more than decoding, paid once per pack of a pull of many small packs)."""
    if not batch:
        return
    decoded = codec.decode_frames(mapped, map(_blob_span, batch), held)
    if decoded is not None and len(decoded) == len(batch):
        ids = list(map(_blob_id, batch))
        if list(map(_digest, map(blake3.blake3, decoded))) == ids:  # (hashed and compared in C: no step per object)
            picks.take(ids, batch, decoded)
            return
        failed = [blob for blob, content in zip(batch, decoded, strict=True)
                  if blake3.blake3(content).digest() != blob.id]
    else:
        failed = batch
    for blob in failed:  # one by one, to name the one that fails
        oid = PREFIX + blob.id.hex()
        frame = bytes(view[blob.offset:blob.offset + blob.length])
        try:
            codec.decode_verified(oid, blob.id.hex(), where, frame)
        except CorruptObjectError as exc:
            raise PackCheckError(str(exc)) from None
    picks.not_kept(batch)  # (not reached when one fails: a batch undecodable at once whose frames each verify)


class ReceivedPack:
    """A verified pack not adopted yet, whose frames the entry checks read back by id (the records
    not kept decoded): a FrameSource (archive_verify.py)."""

    def __init__(self, path: Path, spans: dict[str, Blob]):
        self.path: Path | None = path
        self._spans = spans  # hex id -> its blob in the pack

    def read(self, hexdigest: str) -> bytes:
        blob = self._spans[hexdigest]
        with open(self.path, "rb") as fh:  # type: ignore[arg-type]
            return os.pread(fh.fileno(), blob.length, blob.offset)


def _verify_streaming(fd: int, blob: Blob, where: str, room: int, stored: int) -> int:
    """Check one large frame, decoded a chunk at a time, no further than `room` bytes of content (a frame declaring
    more is refused before it is decoded); the content bytes it decoded to."""
    oid = PREFIX + blob.id.hex()
    seen = 0
    try:
        with codec.ObjectReader(oid, blob.id.hex(), where, BlobFile(fd, blob.offset, blob.length)) as reader:
            if reader.size is not None and reader.size > room:  # (zstd decodes no more than a frame declares)
                raise PackCheckError(f"{where}: object {oid}: {codec.bomb_text(codec.content_bound(stored))}")
            while chunk := reader.read(codec.CHUNK):
                seen += len(chunk)
                if seen > room:
                    raise PackCheckError(f"{where}: object {oid}: {codec.bomb_text(codec.content_bound(stored))}")
    except CorruptObjectError as exc:
        raise PackCheckError(str(exc)) from None
    return seen


# ------------------------------------------------------------------------------------------ adopting

def copy_frames(writer: PackWriter, path: Path, objects: list[Blob]) -> list[Blob]:
    """Append the frames of these objects of a verified pack at `path` to `writer`'s pack, each once, in runs of about
    COPY_BYTES (one read and one write per run: one per object cost more than the check); where they now are."""
    unique = list({blob.id: blob for blob in objects}.values())
    written: list[Blob] = []
    with open(path, "rb") as fh:
        for run in _runs(unique):
            start = run[0].offset
            read = memoryview(os.pread(fh.fileno(), run[-1].offset + run[-1].length - start, start))
            ids, lengths = list(map(_blob_id, run)), list(map(_blob_length, run))
            at = list(map(sub, map(_blob_offset, run), repeat(start)))  # (each payload's place in the read)
            # (append_objects writes what append_many would, its heads and rows a column at a time: no struct call and
            # Blob each; the Blobs are made in C from where it put the payloads)
            offsets = writer.append_objects(ids, list(map(read.__getitem__, map(slice, at, map(add, at, lengths)))))
            written += map(tuple.__new__, repeat(Blob), zip(repeat(KIND_OBJECT), ids, offsets, lengths))
    return written


def _runs(blobs: list[Blob]) -> Iterator[list[Blob]]:
    """The blobs in runs that one read of about COPY_BYTES holds (each after the previous one in the file; a bigger
    frame alone): one read and one write per run, not one per object (which cost more than the check)."""
    run: list[Blob] = []
    for blob in blobs:
        if run and (blob.offset < run[-1].offset + run[-1].length or blob.offset + blob.length - run[0].offset
                    > COPY_BYTES):
            yield run
            run = []
        run.append(blob)
    if run:
        yield run


@dataclass(frozen=True)
class _Adopting:
    """A verified pack on its way into packs/: its file, the id it takes, the objects the index is to name in it."""

    path: Path
    pack_id: str
    objects: list[Blob]
    run: tuple[int, list[bytes]] | None = None  # its objects' segment rows made ahead (all its blobs), in this slot
    locs: dict[bytes, index.Loc] | None = None  # where the index is to name them (all its blobs), made ahead

    def counts(self) -> tuple[int, int]:
        """(objects, their bytes) it adds."""
        return len(self.objects), sum(map(_blob_length, self.objects))  # (in C: a pack of 20,000 after the last)


def adopt_packs(store: ObjectStore, packs: list[_Adopting],
                entries: Mapping[bytes, tuple[bytes | None, int]] | None = None) -> None:
    """Move verified packs (their bytes durable: fsynced when checked) into packs/, then name their objects, and set the
    action-cache `entries` (verified: `fresh_entries`), in one commit: one fsync of packs/ and one segment for them all,
    not one each. Each pack is flocked until the segment is written, so gc (which leaves packs with a live writer alone)
    cannot take it meanwhile."""
    if not packs and not entries:
        return
    runtime = store.runtime
    runtime.start_index()  # (a pull killed before its segment leaves unnamed packs, not a "lost" index)
    runtime.packs_dir.mkdir(exist_ok=True)
    fds: list[int] = []
    try:
        pending = Pending()
        pending.actions.update(entries or {})
        for pack in packs:
            fd = os.open(pack.path, os.O_RDONLY | os.O_CLOEXEC)
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.replace(pack.path, pack_path(runtime.packs_dir, pack.pack_id))  # same bytes if there (a killed pull)
            runtime.forget_pack(pack.pack_id)  # a cached fd of a file replaced above: same bytes, but read the new one
        for pack in reversed(packs):  # (an object in two of them: the first names it, as one setdefault each did)
            pending.objects.update(pack.locs if pack.locs is not None else _locs(pack.pack_id, pack.objects))
        if sum(len(pack.objects) for pack in packs) == len(pending.objects):  # (no object in two: else the dict's)
            pending.object_rows = _object_rows(packs)
        if packs:
            fsync_path(runtime.packs_dir)
        commit(runtime, pending)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _object_rows(packs: list[_Adopting]) -> tuple[list[str], bytes]:
    """The segment rows naming these packs' objects (no object in two): the packs whose rows were made ahead take the
    slots those rows carry (they are used as they are), the others the next ones (their rows made now)."""
    ahead = sorted((pack for pack in packs if pack.run is not None), key=lambda pack: pack.run[0])  # type: ignore[index]
    ordered = ahead + [pack for pack in packs if pack.run is None]
    runs = [pack.run[1] if pack.run is not None and pack.run[0] == slot else _run(pack.objects, slot)
            for slot, pack in enumerate(ordered)]
    return index.merged_runs([pack.pack_id for pack in ordered], runs)


def _locs(pack_id: str, blobs: list[Blob]) -> dict[bytes, index.Loc]:
    """Where the index names these blobs of the pack `pack_id` (by digest; a digest twice: the last blob's)."""
    locs = zip(repeat(pack_id), map(_blob_offset, blobs), map(_blob_length, blobs))
    return dict(zip(map(_blob_id, blobs), locs, strict=True))


def _run(blobs: list[Blob], slot: int) -> list[bytes]:
    """The segment rows of these blobs, sorted, in this pack slot (index.object_run)."""
    ordered = sorted(blobs, key=_blob_id)
    return index.object_run(list(map(_blob_id, ordered)), map(_blob_offset, ordered), map(_blob_length, ordered), slot)


# ------------------------------------------------------------------------------------------ receiving

class Incoming:
    """A pull's packs on their way into the store: each checked whole as it arrives (`check`), then, once
    the entries they bring are verified (`unkept` and `decoded` feed those checks), taken in (`take`, then `adopt`)."""

    def __init__(self, store: ObjectStore):
        from clawstore.store.services.archive_verify import Kept  # (its thread pool's imports: only when a pull runs)

        self.store = store
        self.kept = Kept()  # records decoded while packs were checked, for the entry checks
        self._checked: dict[str, tuple[Path, list[Blob]]] = {}  # pack name -> its file and object blobs
        self._unkept: dict[str, dict[str, Blob]] = {}  # pack name -> the records to keep it holds, not kept (by hex id)
        self._copied: dict[str, tuple[int, int]] = {}  # pack name -> (objects, bytes) copied by copy_in
        self._copies: PackWriter | None = None  # the pack they are copied into, beside the received ones
        self._in_copies: dict[bytes, Blob] = {}  # digest -> its blob in that pack
        self._taken: list[_Adopting] = []  # packs taken, moved in whole by `adopt`
        self._runs: dict[str, tuple[int, list[bytes]]] = {}  # pack name -> its objects' segment rows (slot, rows)
        self._locs: dict[str, dict[bytes, index.Loc]] = {}  # pack name -> where the index is to name its objects
        self._slots = 0  # the segment slots given to those rows so far

    @property
    def decoded(self) -> dict[str, bytes]:
        """The contents kept decoded while packs were checked, by hex id."""
        return self.kept.contents

    def check(self, path: Path, name: str, where: str, keep: AbstractSet[bytes] = frozenset()) -> bytes:
        """Check the pack received at `path` whole (verify_received: PackCheckError naming `where`); its table (checksum
        verified: the rows its objects were read from). The content of those in `keep` is kept decoded, as far as there
        is room (the others named for `unkept`, in the same walk). The file is made durable here, while the next packs
        download (moving it in later needs only its rename made durable)."""
        unkept: dict[str, Blob] = {}
        blobs, table = verify_received(path, name, where, keep, self.kept, unkept)
        fsync_path(path)
        if path.stat().st_size >= ADOPT_BYTES:  # (moved in whole: its objects' index rows made now, not at the end)
            self._runs[name] = (self._slots, _run(blobs, self._slots))
            self._locs[name] = _locs(name[:32], blobs)  # (id: 32 hex)
            self._slots += 1
        self._checked[name] = (path, blobs)
        self._unkept[name] = unkept
        return table

    def held(self, name: str) -> set[bytes]:
        """The digests of the objects of a checked pack."""
        return set(map(_blob_id, self._checked[name][1]))

    def object_ids(self, name: str) -> list[bytes]:
        """The digests of the objects of a checked pack in its table's order, as packfile.table_object_ids reads them
        from the table `check` returned (the rows its blobs were made from: the same bytes objects, not read again)."""
        return list(map(_blob_id, self._checked[name][1]))

    def unkept(self, records: AbstractSet[bytes]) -> dict[str, FrameSource]:
        """The `records` (digests) the packs checked and not taken hold but did not keep decoded, by hex id,
        and the pack to read each from (the entry checks read them). Only records in the `keep` of their pack's
        `check` are found (a pull passes the same set to both)."""
        found: dict[str, FrameSource] = {}
        for name, (path, _) in self._checked.items():
            spans = {hexdigest: blob for hexdigest, blob in self._unkept[name].items()
                     if blob.id in records and hexdigest not in self.kept.contents}
            found.update(dict.fromkeys(spans, ReceivedPack(path, spans)))
        return found

    def take(self, name: str, present: AbstractSet[bytes], leave_out: AbstractSet[bytes] = frozenset(),
             apart: bool = False) -> tuple[int, int]:
        """Take a checked pack in, without the objects in `leave_out` (`present`: digests the store has); returns
        (objects added, their bytes). Nothing moves until `adopt`: a pack of ADOPT_BYTES or more then moves in as it
        is; a smaller one, or one kept `apart`, has had its objects copied into a pack of the pull's own (`copy_in`)."""
        self._unkept.pop(name, None)
        run, locs = self._runs.pop(name, None), self._locs.pop(name, None)
        if not self.copy_in(name, present, leave_out, apart):
            path, blobs = self._checked.pop(name)
            ids = set(map(_blob_id, blobs))
            if len(ids) == len(blobs) and present.isdisjoint(ids) and leave_out.isdisjoint(ids):
                objects = blobs  # (all of them: found in C, not a test each)
            else:  # (an object twice in the pack, as runs put at once leave it, is named and counted once)
                taken: set[bytes] = set()
                objects = [blob for blob in blobs if blob.id not in present and blob.id not in leave_out
                           and not (blob.id in taken or taken.add(blob.id))]
            whole = len(objects) == len(blobs)
            taken = _Adopting(path, name[:32], objects, run if whole else None, locs if whole else None)  # (32 hex)
            self._taken.append(taken)
            return taken.counts()
        del self._checked[name]
        return self._copied.pop(name)

    def copy_in(self, name: str, present: AbstractSet[bytes], leave_out: AbstractSet[bytes] = frozenset(),
                apart: bool = False) -> bool:
        """Copy the objects of a checked pack that `take` does not move in whole (a small one, or one kept `apart`)
        into the pull's own pack, beside the received ones (nothing of the store changes yet): a pull does it right
        after the check, while the next pack downloads. The pack stays readable for the entry checks. False for a
        pack `take` moves in whole; True (and nothing done) for one copied already."""
        path, blobs = self._checked[name]
        if name in self._copied:
            return True
        if not apart and path.stat().st_size >= ADOPT_BYTES:
            return False
        wanted = [blob for blob in blobs
                  if blob.id not in present and blob.id not in leave_out and blob.id not in self._in_copies]
        if not wanted:  # (an entries' pack, its document left out: an empty pack of copies is disk no index names)
            self._copied[name] = (0, 0)
            return True
        if self._copies is None:
            self._copies = PackWriter(path.parent)
        written = copy_frames(self._copies, path, wanted)
        self._in_copies.update((blob.id, blob) for blob in written)
        self._copied[name] = (len(written), sum(blob.length for blob in written))
        return True

    def adopt(self, entries: Mapping[str, str] | None = None,
              replaces: Callable[[str, str], bool] | None = None) -> None:
        """Move every pack taken in whole, and the pack the small packs' objects were copied into, into the store, with
        one index segment naming their objects and setting the `entries` (verified by the caller) where the store has no
        entry of its own or `replaces(own, record)` (call once every pack is taken)."""
        fresh = fresh_entries(self.store, entries, replaces) if entries else None  # (before the packs move: read)
        writer, self._copies = self._copies, None
        taken, self._taken = self._taken, []
        self._slots = 0  # (a later round's rows start again at slot 0: a stale run is made again, never misnamed)
        if writer is not None:
            try:
                writer.seal()  # (durable)
            finally:
                writer.close()
            taken.append(_Adopting(writer.path, writer.pack_id, list(self._in_copies.values())))
            self._in_copies = {}
        adopt_packs(self.store, taken, fresh)

    def close(self) -> None:
        """Let go of the copies' pack if it was not taken (a refused pull: it goes with the scratch directory)."""
        if self._copies is not None:
            self._copies.close()
            self._copies = None


def add_entries(store: ObjectStore, entries: Mapping[str, str]) -> None:
    """Point these keys at these records (verified by the caller) where the store has no entry of its own
    or its own gives way (actions.takes_over: a result is never hidden by a failure)."""
    set_entries(store, fresh_entries(store, entries))


def fresh_entries(store: ObjectStore, entries: Mapping[str, str], replaces: Callable[[str, str], bool] | None = None
                  ) -> dict[bytes, tuple[bytes | None, int]]:
    """Those of these entries to set: where the store has no entry of its own or its own gives way (`replaces(own,
    record)`, by default actions.takes_over reading the store: a result is never hidden by a failure)."""
    store.runtime.index.refresh()
    if replaces is None:
        replaces = lambda own, record: takes_over(store.get_bytes, own, record)  # noqa: E731
    now = time.time_ns()
    keys = list(map(bytes.fromhex, map(_digest_hex, entries)))  # (ids checked by the caller; maps: in C)
    owns = list(own_records(store, keys))
    if owns.count(None) == len(owns):  # (none of its own, as in a store pulled into first: all, no test each)
        records = map(bytes.fromhex, map(_digest_hex, entries.values()))
        return dict(zip(keys, zip(records, repeat(now)), strict=False))  # (repeat: endless)
    fresh: dict[bytes, tuple[bytes | None, int]] = {}
    for digest, record, own in zip(keys, entries.values(), owns, strict=True):
        if own is None or replaces(PREFIX + own.hex(), record):
            fresh[digest] = (bytes.fromhex(record[len(PREFIX):]), now)
    return fresh


def own_records(store: ObjectStore, keys: list[bytes]) -> Iterable[bytes | None]:
    """`entry_record` of each key (not listed again), asked of the index for them all at once when no batch or group of
    this process holds entries the index does not (a pull's 20,000 keys: one pass, not 20,000 calls)."""
    runtime = store.runtime
    if runtime.batch() is not None or runtime.group is not None:
        return [entry_record(store, key, look_again=False) for key in keys]
    return runtime.index.find_records(keys)
