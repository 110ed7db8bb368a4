"""Checking archive members against their ids as they stream by: decompress, hash, compare.

Memory stays bounded whatever the object size: small frames are decoded whole (at most WHOLE_MAX in
and out), big ones stream through a decompressor that hands its output over in pieces of at most
1 MiB. It runs in the reading thread: a worker thread was measured slower on this 2-core machine (the
reader, waking from each write, waits for the GIL the worker holds between zstd calls).
"""

from __future__ import annotations

import blake3
import zstandard

from clawstore.errors import UsageError
from clawstore.store.ids import PREFIX

_WRITE_SIZE = 1 << 20  # decompressed output is hashed in pieces of at most this size
WHOLE_MAX = 64 << 20  # frames (and contents) up to this size are decoded in one call


class ObjectCheckError(UsageError):
    """A member's frame is undecodable or its content does not hash to its name."""


class _ContentCheck:
    """Decompresses one frame as it streams by (bounded output pieces) and hashes the content."""

    def __init__(self, hexdigest: str) -> None:
        self.hexdigest = hexdigest
        self.hasher = blake3.blake3()
        self._writer = zstandard.ZstdDecompressor().stream_writer(self, write_size=_WRITE_SIZE)

    def write(self, data: bytes) -> int:  # called by the decompressor with content bytes
        self.hasher.update(data)
        return len(data)

    def feed(self, frame_bytes: bytes) -> None:
        self._writer.write(frame_bytes)

    def problem(self) -> str | None:
        self._writer.flush()
        if self.hasher.hexdigest() != self.hexdigest:
            return "content does not match its id"
        return None


class Verifier:
    """`start(hex, size)`, `feed(bytes)`..., `end()` per object, in order; raises ObjectCheckError naming
    the first damaged object.

    A frame of up to WHOLE_MAX bytes that declares a content size of up to WHOLE_MAX is decoded in one
    call once all of it has arrived: measured twice as fast as decoding 1 MiB pieces between the reads
    and writes of the import (which evict the decoder's window from the CPU caches). Larger frames, and
    frames without a declared size, stream through `_ContentCheck`."""

    def __init__(self, where: str):
        self._where = where
        self._hexdigest = "?"
        self._check: _ContentCheck | None = None
        self._pieces: list[bytes] | None = None
        self._dctx = zstandard.ZstdDecompressor()

    def _damaged(self, why: str) -> ObjectCheckError:
        return ObjectCheckError(f"{self._where}: object {PREFIX}{self._hexdigest} is damaged ({why})")

    def start(self, hexdigest: str, size: int) -> None:
        self._hexdigest = hexdigest
        self._check = None
        self._pieces = [] if size <= WHOLE_MAX else None

    def feed(self, data: bytes) -> None:
        if self._pieces is not None:
            self._pieces.append(data)
            if len(self._pieces) == 1:
                declared = _declared_size(data)
                if declared is None or declared > WHOLE_MAX:
                    self._pieces = None  # stream it after all
                    self._check = _ContentCheck(self._hexdigest)
                    self._feed(data)
            return
        if self._check is None:
            self._check = _ContentCheck(self._hexdigest)
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        try:
            self._check.feed(data)  # type: ignore[union-attr]
        except zstandard.ZstdError:
            raise self._damaged("undecodable") from None

    def end(self) -> None:
        try:
            if self._pieces is not None:
                why = self._whole(b"".join(self._pieces))
                self._pieces = None
            else:
                why = self._check.problem() if self._check is not None else "content does not match its id"
        except zstandard.ZstdError:
            raise self._damaged("undecodable") from None
        if why:
            raise self._damaged(why)

    def _whole(self, frame: bytes) -> str | None:
        """Decode a complete frame (its declared size bounds the output) and check its content."""
        dobj = self._dctx.decompressobj()
        content = dobj.decompress(frame)
        if not dobj.eof:
            return "truncated frame"
        if dobj.unused_data:
            return "data after the frame"
        if blake3.blake3(content).hexdigest() != self._hexdigest:
            return "content does not match its id"
        return None


def _declared_size(head: bytes) -> int | None:
    try:
        size = zstandard.frame_content_size(head[:18])
    except zstandard.ZstdError:
        return None
    return None if size < 0 else size
