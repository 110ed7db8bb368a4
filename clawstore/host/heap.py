"""The C allocator (glibc malloc) of a long build: settings that keep freed memory from piling up, and a trim.

Python hands objects over 512 bytes (documents, HTTP bodies, dict tables) to malloc. By default glibc gives each
thread that allocates at once an arena of its own (up to 8 a core), serves a block it once mapped and freed from the
heap ever after (its mmap threshold rises to the largest block freed), and keeps what is freed inside a heap until
something asks for it back: a build's heaps kept 30-60 MB free. Elsewhere (another libc) these do nothing."""

from __future__ import annotations

import functools
import sys
from typing import Any

M_MMAP_THRESHOLD = -3  # mallopt parameters (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD = 128 << 10  # blocks this big or bigger mapped on their own and unmapped when freed (glibc's default,
#   kept fixed instead of rising)
ARENA_MAX = 2  # arenas at most: the build's threads take turns under the GIL anyway


@functools.cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes.util  # (here: a dry run imports the engine and never settles, ctypes was ~2 ms of its start)

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def settle(mapped: int = MMAP_THRESHOLD) -> None:
    """Fixed mmap threshold (`mapped`: blocks this big or bigger mapped on their own) and few arenas, for the
    allocations from here on (before the build's threads start)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, mapped)
        libc.mallopt(M_ARENA_MAX, ARENA_MAX)


def trim() -> None:
    """Give the free memory inside malloc's heaps back to the system (whole free pages)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


class Paced:
    """A trim once `every` rows (blobs, records: what the caller counts) were let go since the last: a trim walks the
    heaps (~0.1 ms), and one after each of 1,500 packs of 5 objects cost a later fsck +17 % CPU."""

    def __init__(self, every: int):
        self.every, self._since = every, 0

    def let_go(self, rows: int) -> None:
        self._since += rows
        if self._since >= self.every:
            self._since = 0
            trim()
