"""Store statistics: objects, packs, bytes (logical, stored, apparent, on disk), live share, gc's gain."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawstore.errors import CorruptObjectError, MissingObjectError
from clawstore.store.core.packfile import BLOB_HEAD_SIZE, iter_pack_ids, pack_overhead, pack_path

if TYPE_CHECKING:
    from clawstore.store.store import Store


@dataclass(frozen=True)
class StoreStats:
    objects: int
    logical_bytes: int  # the objects' uncompressed sizes
    stored_bytes: int  # their frames in packs
    packs: int = 0
    files: int = 0  # every file under the store directory
    apparent_bytes: int = 0  # sum of file sizes under the store directory
    disk_bytes: int = 0  # blocks allocated (what `du` counts)
    pack_bytes: int = 0
    live_pack_bytes: int = 0  # pack bytes the index still names (blob headers included)
    gc_would_free: int | None = None  # pack bytes a gc with the default grace would give back

    @property
    def ratio(self) -> float:
        """logical / stored (higher is better); 1.0 for an empty store."""
        return self.logical_bytes / self.stored_bytes if self.stored_bytes else 1.0

    @property
    def live_fraction(self) -> float:
        return self.live_pack_bytes / self.pack_bytes if self.pack_bytes else 1.0

    def to_json(self) -> dict[str, object]:
        return {"objects": self.objects, "logical_bytes": self.logical_bytes, "stored_bytes": self.stored_bytes,
                "ratio": round(self.ratio, 4), "packs": self.packs, "files": self.files,
                "apparent_bytes": self.apparent_bytes, "disk_bytes": self.disk_bytes, "pack_bytes": self.pack_bytes,
                "live_pack_bytes": self.live_pack_bytes, "live_fraction": round(self.live_fraction, 4),
                "gc_would_free": self.gc_would_free}


def store_stats(store: Store, with_gc: bool = True) -> StoreStats:
    count = logical = stored = 0
    for oid in store.iter_objects():
        try:
            obj_logical, obj_stored = store.object_sizes(oid)
        except MissingObjectError:  # removed while we counted (gc)
            continue
        except CorruptObjectError:  # unreadable header: count its bytes, fsck reports it
            obj_logical, obj_stored = 0, store.locate(oid)[2]
        count += 1
        logical += obj_logical
        stored += obj_stored
    index = store.runtime.index
    live = sum(length + BLOB_HEAD_SIZE for _, _, length in index.objects.values())
    live += sum(40 + BLOB_HEAD_SIZE for entry in index.actions.values())
    packs = pack_bytes = 0
    for pack in iter_pack_ids(store.runtime.packs_dir):
        path = pack_path(store.runtime.packs_dir, pack)
        try:
            pack_bytes += os.stat(path).st_size
            live += pack_overhead(path)
            packs += 1
        except FileNotFoundError:
            continue
    files = apparent = disk = 0
    for dirpath, _, filenames in os.walk(store.root):
        for name in filenames:
            try:
                info = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            files += 1
            apparent += info.st_size
            disk += info.st_blocks * 512
    would_free = None
    if with_gc:
        from clawstore.store.services.gc import collect

        would_free = collect(store, dry_run=True).pack_bytes_freed
    return StoreStats(count, logical, stored, packs, files, apparent, disk, pack_bytes, live, would_free)
