"""Checking archive members against their ids as they stream by: decompress, hash, compare.

Memory stays bounded whatever the object size: the decompressor hands its output over in pieces of
at most 1 MiB. It runs in the reading thread: a worker thread was measured slower on this 2-core
machine (the reader, waking from each write, waits for the GIL the worker holds between zstd calls).
"""

from __future__ import annotations

import blake3
import zstandard

from clawstore.errors import UsageError
from clawstore.store.ids import PREFIX

_WRITE_SIZE = 1 << 20  # decompressed output is hashed in pieces of at most this size


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
    """`start(hex)`, `feed(bytes)`..., `end()` per object, in order; raises ObjectCheckError naming the
    first damaged object (at its end, or as soon as its frame cannot be decoded)."""

    def __init__(self, where: str):
        self._where = where
        self._check: _ContentCheck | None = None

    def _damaged(self, why: str) -> ObjectCheckError:
        hexdigest = self._check.hexdigest if self._check else "?"
        return ObjectCheckError(f"{self._where}: object {PREFIX}{hexdigest} is damaged ({why})")

    def start(self, hexdigest: str) -> None:
        self._check = _ContentCheck(hexdigest)

    def feed(self, data: bytes) -> None:
        try:
            self._check.feed(data)  # type: ignore[union-attr]
        except zstandard.ZstdError:
            raise self._damaged("undecodable") from None

    def end(self) -> None:
        try:
            why = self._check.problem()  # type: ignore[union-attr]
        except zstandard.ZstdError:
            raise self._damaged("undecodable") from None
        if why:
            raise self._damaged(why)
        self._check = None
