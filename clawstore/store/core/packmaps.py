"""Packs mapped into memory while frames are copied out of them (archive export, push)."""

from __future__ import annotations

import contextlib
import mmap
from typing import TYPE_CHECKING

from clawstore.errors import MissingObjectError
from clawstore.store.core.index import Loc

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore


class PackMaps:
    """Packs mapped into memory for the length of one export or push: a frame is copied by slicing, with no system call
    (a pread per frame cost a third of an export's time). Details: docs/store.md (Details by module).

    Every RELEASE_EVERY bytes of pages mapped (a read's bytes and FAULT_AROUND: an export copies frames in id order,
    all over the packs, and a page fault on a file maps the 64 KiB around it: Linux's fault-around), the pages read so
    far are let go (madvise DONTNEED: they stay in the page cache, this process no longer maps them): an export's
    resident memory does not grow by the packs it read."""

    RELEASE_EVERY = 64 << 20
    FAULT_AROUND = 64 << 10  # what a read of a few bytes may map (/sys/kernel/mm/... fault_around_bytes' default)

    def __init__(self, store: ObjectStore):
        self._store = store
        self._maps: dict[str, mmap.mmap] = {}
        self._read = 0  # bytes read since the pages were last let go

    def read(self, loc: Loc, size: int, start: int) -> memoryview:
        pack, offset, length = loc
        end = offset + start + min(size, length - start)
        self._read += end - offset - start + self.FAULT_AROUND
        if self._read >= self.RELEASE_EVERY:
            self.release()
        return self.whole(pack, end)[offset + start:end]

    def release(self) -> None:
        """Let go of the mapped pages read so far (read again, they come back from the page cache)."""
        self._read = 0
        for mapped in self._maps.values():
            with contextlib.suppress(ValueError, OSError):  # (a map closed under a view still held)
                mapped.madvise(mmap.MADV_DONTNEED)

    def whole(self, pack: str, end: int) -> memoryview:
        """The pack mapped, at least its first `end` bytes (a caller slicing many frames out of one pack keeps it)."""
        mapped = self._maps.get(pack)
        if mapped is None or len(mapped) < end:
            if mapped is not None:  # grown since: map it again (views of the old map keep it alive)
                with contextlib.suppress(BufferError):
                    mapped.close()
            mapped = self._maps[pack] = mmap.mmap(self._store.runtime.fd(pack), 0, access=mmap.ACCESS_READ)
            if len(mapped) < end:
                raise MissingObjectError(f"pack {pack} is shorter than the index says")
        return memoryview(mapped)

    def close(self) -> None:
        for mapped in self._maps.values():
            with contextlib.suppress(BufferError):  # a view still held: the map goes with it
                mapped.close()
        self._maps.clear()
