"""Object ids: `blake3:<64 lowercase hex>` of an object's uncompressed bytes; the names packs travel under."""

from __future__ import annotations

import os
import re
from pathlib import Path

import blake3

from clawstore.errors import UsageError

PREFIX = "blake3:"
_OID_RE = re.compile(r"blake3:[0-9a-f]{64}")
_HEX_RE = re.compile(r"[0-9a-f]{64}")


# blake3's threads: all cores, but one in a forked process. Its pool (rayon's) is not copied by fork, so a hash handed
# to it in a child of a process that had started it waits forever (fsck's helpers fork after their parent hashed).
_threads = blake3.blake3.AUTO


def _forked() -> None:
    global _threads
    _threads = 1


os.register_at_fork(after_in_child=_forked)


def parallel_hasher() -> blake3.blake3:
    """A BLAKE3 hasher for big inputs: on all cores (one in a forked process, see `_threads`)."""
    return blake3.blake3(max_threads=_threads)


class BadObjectIdError(UsageError):
    """A string that should be an object id is not one (exit 2: it is bad input, not a bad store)."""


def is_oid(value: object) -> bool:
    return isinstance(value, str) and _OID_RE.fullmatch(value) is not None


def check_oid(value: object, what: str = "object id") -> str:
    """Return `value` if it is a well-formed id, else raise BadObjectIdError naming it."""
    if not is_oid(value):
        raise BadObjectIdError(f"not a valid {what}: {value!r} (expected blake3:<64 hex digits>)")
    return value  # type: ignore[return-value]


def oid_hex(oid: str) -> str:
    return check_oid(oid)[len(PREFIX):]


def oid_from_hex(hexdigest: str) -> str:
    return PREFIX + hexdigest


def is_hex64(value: str) -> bool:
    return _HEX_RE.fullmatch(value) is not None


def oid_of(data: bytes | bytearray | memoryview) -> str:
    """The id `data` would get in the store (hashes with all cores for big inputs)."""
    hasher = parallel_hasher() if len(data) >= 1 << 20 else blake3.blake3()
    hasher.update(data)
    return PREFIX + hasher.hexdigest()


FILE_CHUNK = 1 << 20  # bytes of a file hashed at once: what file_digest holds (a mapping would add the file to RSS;
#   8 MiB hashed no faster and was held during a build's pack seal: docs/scale/building.md, Session 56: the seal)


def file_digest(path: Path) -> str:
    """Hex BLAKE3 of a file's bytes (the name a pack travels under; what fsck's edges files record), hashed with all
    cores, FILE_CHUNK bytes at a time."""
    hasher = parallel_hasher()
    # (into one buffer: a fresh 8 MiB bytes a read was a fresh mapping, faulted in page by page, which cost as much CPU
    # as the hash itself)
    buffer = bytearray(FILE_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:
        while size := fh.readinto(buffer):
            hasher.update(view[:size])
    return hasher.hexdigest()
