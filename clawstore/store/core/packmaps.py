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
    (a pread per frame cost a third of an export's time). Details: docs/store.md (Details by module)."""

    def __init__(self, store: ObjectStore):
        self._store = store
        self._maps: dict[str, mmap.mmap] = {}

    def read(self, loc: Loc, size: int, start: int) -> memoryview:
        pack, offset, length = loc
        end = offset + start + min(size, length - start)
        return self.whole(pack, end)[offset + start:end]

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
