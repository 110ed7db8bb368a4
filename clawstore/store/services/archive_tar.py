"""A strict, deterministic subset of POSIX ustar: what `claw archive` writes and accepts, so that the same members
always give the same bytes and `tar tf` still lists them. The subset: docs/gc-and-archives.md (Details by module)."""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

BLOCK = 512
_MAX_SIZE = 8 ** 11 - 1  # what an 11-digit octal size field holds (8 GiB)


class TarFormatError(ValueError):
    """The bytes are not a tar stream this module wrote."""


_MODE_UID_GID = b"0000644\0" + b"0000000\0" + b"0000000\0"  # bytes 100..124
_MTIME = b"00000000000\0"  # bytes 136..148: mtime 0
_AFTER_CHECKSUM = b"0" + bytes(100) + b"ustar\0" + b"00" + bytes(BLOCK - 265)  # type, link name, magic
# The checksum is the sum of the header's bytes with its own field taken as 8 spaces.
_FIXED_SUM = sum(_MODE_UID_GID) + sum(_MTIME) + sum(b" " * 8) + sum(_AFTER_CHECKSUM)


def header(name: str, size: int) -> bytes:
    """The 512-byte ustar header of a regular file `name` of `size` bytes."""
    raw = name.encode("utf-8")
    if not raw or len(raw) > 100:
        raise ValueError(f"tar member name must be 1..100 bytes: {name!r}")
    if not 0 <= size <= _MAX_SIZE:
        raise ValueError(f"tar member {name} is too large ({size} bytes)")
    size_field = b"%011o\0" % size
    checksum = _FIXED_SUM + sum(raw) + sum(size_field)
    return b"".join((raw, bytes(100 - len(raw)), _MODE_UID_GID, size_field, _MTIME, b"%06o\0 " % checksum,
                     _AFTER_CHECKSUM))


def padding(size: int) -> bytes:
    return bytes(-size % BLOCK)


TRAILER = bytes(2 * BLOCK)


def parse_header(block: bytes) -> tuple[str, int]:
    """(name, size) of a header this module wrote; TarFormatError for anything else."""
    if len(block) != BLOCK:
        raise TarFormatError("truncated (a member header is cut short)")
    name_field = block[0:100]
    name = name_field.split(b"\0", 1)[0]
    try:
        size = int(block[124:135], 8)
        text = name.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise TarFormatError("damaged member header") from None
    try:
        expected = header(text, size)
    except ValueError:
        raise TarFormatError("damaged member header") from None
    if block != expected:
        raise TarFormatError(f"damaged member header (member {text!r})")
    return text, size


class Reader:
    """Reads members in order from a binary stream, feeding every byte read to `observe`."""

    def __init__(self, stream: BinaryIO, observe: Callable[[bytes], None]):
        self._stream = stream
        self._observe = observe
        self.offset = 0
        self.start = b""  # the stream's first bytes (up to a block): a text file is "not an archive", not "truncated"

    def _read_exact(self, count: int, what: str) -> bytes:
        data = self._stream.read(count)
        if self.offset == 0:
            self.start = data[:BLOCK]
        if len(data) != count:
            raise TarFormatError(f"truncated ({what} ends early at byte {self.offset + len(data)})")
        self._observe(data)
        self.offset += count
        return data

    def next_header(self) -> tuple[str, int] | None:
        """The next member's (name, size), or None at the end (after checking the trailer)."""
        start = self.offset
        block = self._read_exact(BLOCK, "a member header")
        if block == bytes(BLOCK):
            if self._read_exact(BLOCK, "the end-of-archive marker") != bytes(BLOCK):
                raise TarFormatError("damaged end-of-archive marker")
            # The observed bytes are past what a seal covers; the trailer must be exactly zeros.
            if self._stream.read(1):
                raise TarFormatError(f"unexpected data after the end-of-archive marker (byte {start + 2 * BLOCK})")
            return None
        return parse_header(block)

    def read_data(self, size: int, sink: Callable[[bytes], None], chunk: int = 1 << 20) -> None:
        """Stream a member's `size` bytes into `sink`, then check its zero padding."""
        left = size
        while left:
            data = self._read_exact(min(chunk, left), "a member")
            sink(data)
            left -= len(data)
        pad = self._read_exact(len(padding(size)), "a member's padding")
        if pad.strip(b"\0"):
            raise TarFormatError("damaged padding after a member")

    def read_whole(self, size: int) -> bytes:
        """A member's `size` bytes in one piece (for members small enough to hold), padding checked."""
        data = self._read_exact(size, "a member") if size else b""
        pad = self._read_exact(len(padding(size)), "a member's padding")
        if pad.strip(b"\0"):
            raise TarFormatError("damaged padding after a member")
        return data

    def skip_data(self, size: int) -> None:
        self.read_data(size, lambda _data: None)
