"""Checking archive members against their ids as they stream by: decompress, hash, compare.

Memory stays bounded whatever the object size: small frames are decoded whole (at most WHOLE_MAX in
and out, PENDING_MAX waiting), big ones stream through a decompressor that hands its output over in
pieces of at most 1 MiB. CPU is bounded by the archive's size: all its frames together decode to at most
CONTENT_RATIO times their bytes (CONTENT_FLOOR at least), a frame declaring more refused before any of it is decoded.
"""

from __future__ import annotations

import contextlib
import os
import threading
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, Protocol

import blake3
import zstandard

from clawstore.errors import StoreError, UsageError
from clawstore.store.core.codec import bomb_text, content_bound, decompressor
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.packfile import KIND_OBJECT, Blob, PackWriter
from clawstore.store.services.archive_listing import SortedDigests

OBJECT_MODE = 0o444  # staged frames are never edited

_WRITE_SIZE = 1 << 20  # decompressed output is hashed in pieces of at most this size
WHOLE_MAX = 64 << 20  # frames (and contents) up to this size are decoded in one call
PENDING_MAX = 256 << 20  # frames waiting for the pool
# Smaller frames are checked in the reading thread: handing one to the pool (a future, a lock, a
# wake-up) costs more than decoding and hashing it, and small inputs hold the GIL anyway.
INLINE_MAX = 64 << 10
WORKERS = 2
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
KEEP_EACH = 64 << 10  # a record kept decoded for the entry checks (claw's are a few KiB)
KEEP_BUDGET = 64 << 20  # all of them: entries may point at anything, decompression bombs included


class PackStage:
    """Small frames of an import, written as they are found good into a pack of the import's own that nothing names
    until the import publishes it (deleted if it fails). `read(hex)` gives a frame back. Where each frame went is kept
    by its place in the archive's listing (`attach`), in two arrays: no entry per object. Details:
    docs/gc-and-archives.md (Details by module)."""

    FLUSH_BYTES = 1 << 20
    FLUSH_BLOBS = 500  # two parts each: one pwritev takes at most 1024

    def __init__(self, make_writer: Callable[[], PackWriter]):
        self._make_writer = make_writer
        self.writer: PackWriter | None = None
        self._lock = threading.Lock()  # frames checked by the pool are appended from its threads
        self._queued: list[tuple[int, bytes, list[bytes | memoryview]]] = []
        self._queued_bytes = 0
        self._queued_index: dict[str, int] = {}
        self.listing = SortedDigests(b"")
        self._offsets = array("Q")  # by place in the listing: where the frame is in the pack
        self._lengths = array("Q")  # (0: not staged here)
        self._hint = 0  # frames come in the listing's order, but for those the pool checked
        self._asked = ("", -1)  # the last frame looked for, and its place
        self.published = False  # set by the importer once an index names the pack

    def attach(self, listing: SortedDigests) -> None:
        """The archive's listing: every frame appended is one of its objects."""
        self.listing = listing
        self._offsets = array("Q", bytes(8 * len(listing)))
        self._lengths = array("Q", bytes(8 * len(listing)))

    @property
    def path(self) -> Path | None:
        return self.writer.path if self.writer is not None else None

    def append(self, hexdigest: str, frame: bytes | memoryview) -> None:
        with self._lock:
            self._queued_index[hexdigest] = len(self._queued)
            self._queued.append((KIND_OBJECT, bytes.fromhex(hexdigest), [frame]))
            self._queued_bytes += len(frame)
            if self._queued_bytes >= self.FLUSH_BYTES or len(self._queued) >= self.FLUSH_BLOBS:
                self._flush()

    def _flush(self) -> None:
        if not self._queued:
            return
        if self.writer is None:
            self.writer = self._make_writer()
        try:
            blobs = self.writer.append_many(self._queued)
        except OSError as exc:  # the store's disk, not the archive
            raise StoreError(f"cannot stage objects in {self.writer.path.parent}: {exc.strerror}") from None
        for blob in blobs:
            at = self.listing.index(blob.id, self._hint)
            if at < 0:
                raise ValueError(f"{PREFIX}{blob.id.hex()} is not in the archive's listing")
            self._offsets[at], self._lengths[at] = blob.offset, blob.length
            self._hint = at + 1
        self._asked = ("", -1)
        self._queued.clear()
        self._queued_index.clear()
        self._queued_bytes = 0

    def _place(self, hexdigest: str) -> int:
        if hexdigest == self._asked[0]:  # (an importer's check asks `holds`, then `read`, of one frame)
            return self._asked[1]
        at = self.listing.index(bytes.fromhex(hexdigest)) if len(hexdigest) == 64 else -1
        at = at if at >= 0 and self._lengths[at] else -1
        self._asked = (hexdigest, at)
        return at

    def holds(self, hexdigest: str) -> bool:
        """Was this frame staged here?"""
        with self._lock:
            if hexdigest in self._queued_index:
                return True
        return self._place(hexdigest) >= 0

    def read(self, hexdigest: str) -> bytes:
        with self._lock:
            index = self._queued_index.get(hexdigest)
            if index is not None:
                return bytes(self._queued[index][2][0])
        at = self._place(hexdigest)
        if at < 0:
            raise KeyError(hexdigest)
        assert self.writer is not None
        return os.pread(self.writer.fd, self._lengths[at], self._offsets[at])

    def staged(self) -> Iterator[Blob]:
        """Every frame staged here (after `seal`), in the listing's order."""
        listing, lengths = self.listing, self._lengths
        for at in range(len(lengths)):
            if lengths[at]:
                yield Blob(KIND_OBJECT, listing.digest_at(at), self._offsets[at], lengths[at])

    def seal(self) -> PackWriter | None:
        """Write what is queued, add the pack's trailer and make it durable; the writer (None: empty)."""
        with self._lock:
            self._flush()
        if self.writer is not None:
            self.writer.seal()
            self.writer.close()
        return self.writer

    def discard(self) -> None:
        """The import failed: the pack goes (no index names anything in it)."""
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.writer.path)


Stage = Path | PackStage


class FrameSource(Protocol):
    """Where an import's or a pull's checks read a frame back before it is published (a PackStage, a
    received pack)."""

    @property
    def path(self) -> Path | None: ...

    def read(self, hexdigest: str) -> bytes: ...


class Kept:
    """Decoded records and input documents kept for the entry checks that read them next, so they are
    not read and decoded twice: each at most KEEP_EACH bytes, KEEP_BUDGET in all. A listing's or a
    manifest's entries may point at anything, decompression bombs included; what is not kept is read
    again where it is staged, one at a time."""

    def __init__(self) -> None:
        self.contents: dict[str, bytes] = {}
        self.room = KEEP_BUDGET

    def reserve(self, size: int) -> bool:
        """Room for one more content of `size` bytes? (Then it is taken.)"""
        if size > KEEP_EACH or size > self.room:
            return False
        self.room -= size
        return True

    def reserve_all(self, sizes: Sequence[int]) -> bool:
        """Room for all of these contents, as `reserve` of each would find? (Then it is taken; else none is.)"""
        total = sum(sizes)
        if max(sizes, default=0) > KEEP_EACH or total > self.room:
            return False
        self.room -= total
        return True


class ObjectCheckError(UsageError):
    """A member's frame is undecodable or its content does not hash to its name."""


class _ContentCheck:
    """Decompresses one frame as it streams by (bounded output pieces) and hashes the content."""

    def __init__(self, hexdigest: str, charge: Callable[[int], None] | None = None) -> None:
        self.hexdigest = hexdigest
        self.hasher = blake3.blake3()
        self._charge = charge  # told of each piece of content (a frame that declares no size)
        self._writer = zstandard.ZstdDecompressor().stream_writer(self, write_size=_WRITE_SIZE)

    def write(self, data: bytes) -> int:  # called by the decompressor with content bytes
        if self._charge is not None:
            self._charge(len(data))  # (raises past the bound: the decompressor stops there)
        self.hasher.update(data)
        return len(data)

    def feed(self, frame_bytes: bytes | memoryview) -> None:
        self._writer.write(frame_bytes)

    def problem(self) -> str | None:
        self._writer.flush()
        if self.hasher.hexdigest() != self.hexdigest:
            return "content does not match its id"
        return None


class Verifier:
    """Per object, in archive order: `check_whole(hex, frame)` for a member held whole, or `start(hex)`,
    `feed(bytes)`..., `end()` for one that streams; then `finish()`. ObjectCheckError names the first damaged object.
    Large frames are checked by a small pool. Details: docs/gc-and-archives.md (Details by module)."""

    def __init__(self, where: str, workers: int = WORKERS):
        self._where = where
        self._hexdigest = "?"
        self._check: _ContentCheck | None = None
        self._stage: Path | None = None
        self._sink: BinaryIO | None = None
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="archive-verify")
        self._pending: deque[tuple[str, int, Future[tuple[str | None, bytes | None]]]] = deque()
        self._pending_bytes = 0
        self.kept = Kept()
        self.bound: int | None = None  # content bytes all frames may decode to (None: no bound)
        self._room = 0

    def limit(self, stored_bytes: int) -> None:
        """Bound the content all frames may decode to by their `stored_bytes` (CONTENT_RATIO times, CONTENT_FLOOR at
        least)."""
        self.bound = self._room = content_bound(stored_bytes)

    def _charge(self, hexdigest: str, size: int) -> None:
        """`size` more bytes of content to decode: refused past the bound (earlier members in the pool named first)."""
        if self.bound is None:
            return
        self._room -= size
        if self._room < 0:
            self.finish()
            raise self._damaged(hexdigest, bomb_text(self.bound))

    def _damaged(self, hexdigest: str, why: str) -> ObjectCheckError:
        return ObjectCheckError(f"{self._where}: object {PREFIX}{hexdigest} is damaged ({why})")

    def check_whole(self, hexdigest: str, frame: bytes, stage: Stage | None = None, wanted: bool = False) -> None:
        """A complete member of at most WHOLE_MAX bytes: checked (and staged) by the pool when it
        declares a content size of at most WHOLE_MAX, else streamed here. `wanted`: its content is kept (`kept`) if
        there is room (small JSON the importer reads next)."""
        declared = _declared_size(frame)
        if declared is not None and declared <= WHOLE_MAX:
            self._charge(hexdigest, declared)  # (zstd decodes no more than a frame declares)
        if declared is None or declared > WHOLE_MAX:
            self.start(hexdigest, stage if isinstance(stage, Path) else None)
            view = memoryview(frame)
            for offset in range(0, len(frame), _WRITE_SIZE):
                self.feed(view[offset:offset + _WRITE_SIZE])
            self.end()
            if isinstance(stage, PackStage):
                stage.append(hexdigest, frame)  # checked: staged whole
            return
        keep = wanted and self.kept.reserve(declared)
        if len(frame) <= INLINE_MAX:
            why, content = _check_whole(frame, hexdigest, stage, keep)
            if why:
                self.finish()  # an earlier member still in the pool is named first
                raise self._damaged(hexdigest, why)
            if content is not None:
                self.kept.contents[hexdigest] = content
            return
        future = self._pool.submit(_check_whole, frame, hexdigest, stage, keep)
        self._pending.append((hexdigest, len(frame), future))
        self._pending_bytes += len(frame)
        while self._pending_bytes > PENDING_MAX:
            self._settle_oldest()

    def start(self, hexdigest: str, stage: Path | None = None) -> None:
        """Begin a member that streams through `feed` (`stage`: a new file to copy its bytes into)."""
        self._hexdigest = hexdigest
        self._check = None
        self._stage = stage
        self._sink = None

    def feed(self, data: bytes | memoryview) -> None:
        if self._check is None:
            hexdigest = self._hexdigest
            declared = _declared_size(bytes(data[:18]))
            if declared is not None:
                self._charge(hexdigest, declared)  # refused before any of it is decoded
            charge = None if declared is not None else lambda size: self._charge(hexdigest, size)
            self._check = _ContentCheck(hexdigest, charge)
            if self._stage is not None:
                self._sink = open_staging(self._stage)
        if self._sink is not None:
            write_staging(self._sink, data, self._stage)
        try:
            self._check.feed(data)
        except zstandard.ZstdError:
            raise self._damaged(self._hexdigest, "undecodable") from None

    def end(self) -> None:
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        try:
            why = self._check.problem() if self._check is not None else "empty frame"
        except zstandard.ZstdError:
            why = "undecodable"
        if why:
            raise self._damaged(self._hexdigest, why)

    def _settle_oldest(self) -> None:
        hexdigest, size, future = self._pending.popleft()
        self._pending_bytes -= size
        why, content = future.result()
        if why:
            raise self._damaged(hexdigest, why)
        if content is not None:
            self.kept.contents[hexdigest] = content

    def finish(self) -> None:
        """Wait for every object checked in the pool; raise for the first damaged one."""
        while self._pending:
            self._settle_oldest()

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        for _, _, future in self._pending:
            future.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=True)


def _check_whole(frame: bytes, hexdigest: str, stage: Stage | None, keep: bool = False
                 ) -> tuple[str | None, bytes | None]:
    """(why a complete member is not the object `hexdigest` or None, its content if `keep`); a good
    one is staged."""
    length = frame_length(frame)
    if length is None or length > len(frame):
        return "truncated or undecodable frame", None
    if length < len(frame):
        return "data after the frame", None
    try:
        content = decompressor().decompress(frame)  # the declared size bounds the output
    except zstandard.ZstdError:
        return "undecodable", None
    if blake3.blake3(content).hexdigest() != hexdigest:
        return "content does not match its id", None
    if isinstance(stage, PackStage):
        stage.append(hexdigest, frame)
    elif stage is not None:
        with open_staging(stage) as sink:
            write_staging(sink, frame, stage)
    return None, content if keep else None


def open_staging(path: Path) -> BinaryIO:
    """A new, read-only-mode temp file for an object's frame (StoreError if the store cannot take it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, OBJECT_MODE)
    except OSError as exc:
        raise StoreError(f"cannot stage objects in {path.parent}: {exc.strerror}") from None
    return open(fd, "wb")


def write_staging(sink: BinaryIO, data: bytes | memoryview, path: Path | None) -> None:
    try:
        sink.write(data)
    except OSError as exc:  # the store's disk, not the archive
        raise StoreError(f"cannot stage objects in {path.parent if path else 'the store'}: {exc.strerror}") from None


def frame_length(frame: bytes) -> int | None:
    """Bytes the zstd frame at the start of `frame` occupies (walking its block headers), None if it is
    not a zstd frame. May exceed len(frame) when the frame is cut short."""
    if len(frame) < 6 or frame[:4] != ZSTD_MAGIC:
        return None
    descriptor = frame[4]
    single_segment = (descriptor >> 5) & 1
    pos = 5 + (1 - single_segment) + (0, 1, 2, 4)[descriptor & 3]
    pos += (single_segment, 2, 4, 8)[descriptor >> 6]
    while True:
        if pos + 3 > len(frame):
            return pos + 3
        block = int.from_bytes(frame[pos:pos + 3], "little")
        pos += 3
        kind = (block >> 1) & 3
        if kind == 3:
            return None  # reserved block type
        pos += 1 if kind == 1 else block >> 3  # an RLE block stores one byte
        if block & 1:
            return pos + (4 if (descriptor >> 2) & 1 else 0)


def _declared_size(head: bytes) -> int | None:
    try:
        size = zstandard.frame_content_size(head[:18])
    except zstandard.ZstdError:
        return None
    return None if size < 0 else size
