"""On-disk encoding of objects: always one zstd frame, so that `zstd -d` reads every object by hand; incompressible data
goes in raw blocks. docs/store.md (Objects; Details by module)."""

from __future__ import annotations

import io
import mmap
import os
import threading
from array import array
from collections.abc import Iterable
from itertools import chain
from typing import BinaryIO

import blake3
import zstandard

from clawstore.errors import CorruptObjectError
from clawstore.store.core.ids import parallel_hasher

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
CHUNK = 1 << 20  # streaming unit for puts and gets
RAW_BLOCK = 1 << 17  # zstd's maximum block size
MIN_SAVING = 0.03  # below this saving an object is stored as raw blocks
MAX_HEADER = 18  # longest zstd frame header: magic + descriptor + window + dict id + 8-byte size
BATCH_MAX = 1 << 20  # frames declaring at most this content are decoded in batches; larger ones stream
THREADED_BYTES = 1 << 20  # content of a batch decoded with zstd's threads: below, one thread is faster
_RAW_HEADER_LEN = 14
# Content frames received from elsewhere (an archive, a pulled pack) may decode to: CONTENT_RATIO times their bytes, at
# least CONTENT_FLOOR (`content_bound`). A frame of 4-byte RLE blocks decodes 32,768 times its size (0.6 s of CPU a GiB,
# decoded and hashed): before session 75 a 1 MB archive or pack held an import or a pull for minutes before its content
# was found not to match its name. A store's own frames of zeros reach that ratio too, but a campaign's (JSON records,
# transcripts) is below 20:1.
CONTENT_FLOOR = 512 << 20
CONTENT_RATIO = 1024
# Frame header descriptor 0xC0: 8-byte content size, not single-segment, no checksum, no dictionary.
# Window descriptor 0x38: 2**17 bytes, so decoders never need more than one block of memory.
_RAW_DESCRIPTOR = bytes([0xC0, 0x38])

_tls = threading.local()  # zstd contexts are not thread-safe: one per thread


def _compressor(level: int, threads: int) -> zstandard.ZstdCompressor:
    cache: dict[tuple[int, int], zstandard.ZstdCompressor] = _tls.__dict__.setdefault("cctx", {})
    cctx = cache.get((level, threads))
    if cctx is None:
        cctx = cache[(level, threads)] = zstandard.ZstdCompressor(level=level, threads=threads)
    return cctx


def decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompression context (making one costs more than decoding a small frame)."""
    dctx = _tls.__dict__.get("dctx")
    if dctx is None:
        dctx = _tls.dctx = zstandard.ZstdDecompressor()
    return dctx


def _raw_header(size: int) -> bytes:
    return ZSTD_MAGIC + _RAW_DESCRIPTOR + size.to_bytes(8, "little")


def _block_header(size: int, last: bool) -> bytes:
    return ((size << 3) | int(last)).to_bytes(3, "little")  # block type 0 = raw


def raw_frame_parts(data: bytes | memoryview) -> list[bytes | memoryview]:
    """A zstd frame holding `data` uncompressed, as buffers to write in order (no joined copy)."""
    view = memoryview(data)
    parts: list[bytes | memoryview] = [_raw_header(len(view))]
    start = 0
    while len(view) - start > RAW_BLOCK:
        parts += (_block_header(RAW_BLOCK, False), view[start:start + RAW_BLOCK])
        start += RAW_BLOCK
    parts += (_block_header(len(view) - start, True), view[start:])
    return parts


def raw_frame(data: bytes | memoryview) -> bytes:
    return b"".join(raw_frame_parts(data))


def encode(data: bytes | memoryview, level: int) -> list[bytes | memoryview]:
    """The stored form of an object encoded in one call, as buffers to write in order."""
    frame = _compressor(level, 0).compress(data)
    if len(frame) > len(data) * (1 - MIN_SAVING) and len(data) > 64:
        return raw_frame_parts(data)
    return [frame]


class StreamEncoder:
    """Hashes and encodes a byte stream into `out` in one pass (bounded memory).

    `size` (if known) goes into the frame header so sizes can be read without decoding.
    """

    def __init__(self, out: BinaryIO, level: int, size: int | None = None, threads: int = 0,
                 hash_input: bool = True):
        self._out = out
        self._level = level
        self._threads = threads
        self._pledged = size
        self._hasher = parallel_hasher() if hash_input else None
        self._compressobj: zstandard.ZstdCompressionObj | None = None
        self._raw = False
        self._decided = False
        self._pending = b""  # raw mode: bytes not yet written as a block (the last block is unknown)
        self.size = 0

    def write(self, chunk: bytes | memoryview) -> None:
        view = memoryview(chunk)
        if not view:
            return
        if self._hasher is not None:
            self._hasher.update(view)
        self.size += len(view)
        if not self._decided:
            self._decide(view)
        elif self._raw:
            self._write_raw(view)
        else:
            assert self._compressobj is not None
            self._out.write(self._compressobj.compress(view))

    def _decide(self, view: memoryview) -> None:
        """Compress the first chunk for real; keep the result unless it saved too little."""
        self._decided = True
        cobj = _compressor(self._level, self._threads).compressobj(
            size=self._pledged if self._pledged is not None else -1
        )
        head = cobj.compress(view) + cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        if len(head) > len(view) * (1 - MIN_SAVING):
            self._raw = True
            self._out.write(_raw_header(self._pledged or 0))
            self._write_raw(view)
        else:
            self._compressobj = cobj
            self._out.write(head)

    def _write_raw(self, view: memoryview) -> None:
        data = memoryview(self._pending + view) if self._pending else view
        full = len(data) - len(data) % RAW_BLOCK
        if full == len(data) and full:
            full -= RAW_BLOCK  # keep one block back: it may be the last one
        parts: list[bytes | memoryview] = []
        for start in range(0, full, RAW_BLOCK):
            parts += (_block_header(RAW_BLOCK, False), data[start:start + RAW_BLOCK])
        if parts:
            self._out.write(b"".join(parts))
        self._pending = bytes(data[full:])

    def finish(self) -> str:
        """Complete the frame; returns the hex digest of everything written ("" if not hashing)."""
        if not self._decided:  # empty input
            self._out.write(encode(b"", self._level)[0])
        elif self._raw:
            self._out.write(_block_header(len(self._pending), True) + self._pending)
            self._pending = b""
            if self._pledged != self.size:  # unknown or wrong up front: patch the 8-byte size field
                self._out.seek(len(ZSTD_MAGIC) + len(_RAW_DESCRIPTOR))
                self._out.write(self.size.to_bytes(8, "little"))
                self._out.seek(0, os.SEEK_END)
        else:
            assert self._compressobj is not None
            self._out.write(self._compressobj.flush())
        return self._hasher.hexdigest() if self._hasher is not None else ""


def content_bound(stored: int) -> int:
    """Content bytes frames of `stored` bytes received from elsewhere may decode to, all together."""
    return max(CONTENT_FLOOR, CONTENT_RATIO * stored)


def bomb_text(bound: int) -> str:
    """Why frames past `content_bound` are refused, as a damaged object's or pack's message says it."""
    return (f"it decodes to more than the {bound >> 20} MiB of content its size allows: {CONTENT_RATIO} times its "
            f"frames' bytes, {CONTENT_FLOOR >> 20} MiB at least")


def content_size(header: bytes) -> int | None:
    """Logical size recorded in a frame header, None if the frame does not record it."""
    try:
        size = zstandard.frame_content_size(header)
    except zstandard.ZstdError:
        return None
    return None if size < 0 else size


def batch_size(header: bytes | memoryview) -> int:
    """The content size a frame declares if it can be decoded in a batch (`decode_frames`), else 0: zstd's
    batch decoder needs a declared size and corrupts memory on an empty frame; large contents stream."""
    try:
        size = zstandard.frame_content_size(header[:MAX_HEADER])
    except zstandard.ZstdError:
        return 0
    return size if batched(size) else 0


def batched(size: int) -> bool:
    """Is a frame declaring this content size (-1: none) decoded in a batch (`batch_size`)?"""
    return 0 < size <= BATCH_MAX


def declared_sizes(buffer: bytes | mmap.mmap, offsets: Iterable[int]) -> list[int] | None:
    """The content size the frame at each of these offsets of `buffer` declares (-1: none), read in C with no Python
    call per frame; None when a header is not a frame's (the caller asks `batch_size` of each)."""
    starts = list(offsets)
    try:
        return list(map(zstandard.frame_content_size,
                        map(buffer.__getitem__, map(slice, starts, map(MAX_HEADER.__add__, starts)))))
    except zstandard.ZstdError:
        return None


def decode_frames(buffer: bytes | memoryview | mmap.mmap, spans: Iterable[tuple[int, int]], held: int
                  ) -> zstandard.BufferWithSegmentsCollection | None:
    """Decode the frames at these (offset, length) spans of `buffer`, each declaring a `batch_size`, in
    one call of zstd's C batch API (its own threads when their contents, `held` bytes, are large enough
    to pay for starting them). Unverified: the caller hashes each. None when one does not decode."""
    segments = array("Q", chain.from_iterable(spans))  # (zstd's segments: native 64-bit pairs; made in C, no pack each)
    try:
        return decompressor().multi_decompress_to_buffer(
            zstandard.BufferWithSegments(buffer, segments), threads=-1 if held >= THREADED_BYTES else 0)
    except zstandard.ZstdError:
        return None


def decode_verified(oid: str, hexdigest: str, path: str, frame: bytes) -> bytes:
    """Decode a whole stored frame and check it hashes to `hexdigest`."""
    try:
        size = content_size(frame[:MAX_HEADER])
        if size is not None and size <= 64 << 20:
            data = decompressor().decompress(frame)
        else:
            with decompressor().stream_reader(io.BytesIO(frame)) as reader:
                data = reader.read()
    except zstandard.ZstdError as exc:
        raise CorruptObjectError(f"object {oid} is corrupt (undecodable: {exc}): {path}") from None
    if blake3.blake3(data).hexdigest() != hexdigest:
        raise CorruptObjectError(f"object {oid} is corrupt (content does not match its id): {path}")
    return data


class ObjectReader(io.RawIOBase):
    """Streaming, verifying reader of one object.

    The hash is checked when the end is reached: the final read raises CorruptObjectError on a
    mismatch, so a consumer that reads to EOF never accepts bad data silently.
    """

    def __init__(self, oid: str, hexdigest: str, path: str, source: BinaryIO | None = None):
        super().__init__()
        self.oid = oid
        self.path = path
        self._expected = hexdigest
        # `source`: the stored frame as a seekable file (a blob in a pack); else the file at `path`
        self._file = source if source is not None else open(path, "rb")  # noqa: SIM115 - closed in close()
        self.size = content_size(self._file.read(MAX_HEADER))
        self._file.seek(0)
        self._reader = decompressor().stream_reader(self._file, read_size=CHUNK, closefd=False)
        self._hasher = blake3.blake3()
        self._seen = 0
        self._verified = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            count = self._reader.readinto(buffer)
        except zstandard.ZstdError as exc:
            raise CorruptObjectError(f"object {self.oid} is corrupt (undecodable: {exc}): {self.path}") from None
        if count:
            self._hasher.update(memoryview(buffer)[:count])
            self._seen += count
        elif not self._verified:
            self._verify()
        return count

    def _verify(self) -> None:
        if self._hasher.hexdigest() != self._expected or (self.size is not None and self._seen != self.size):
            raise CorruptObjectError(f"object {self.oid} is corrupt (content does not match its id): {self.path}")
        self._verified = True

    def readall(self) -> bytes:
        parts = []
        while chunk := self.read(CHUNK):
            parts.append(chunk)
        return b"".join(parts)

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
            self._file.close()
        super().close()
