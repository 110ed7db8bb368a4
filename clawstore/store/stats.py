"""Store statistics: object count, logical and stored bytes (read from frame headers, not decoded)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawstore.errors import CorruptObjectError, MissingObjectError

if TYPE_CHECKING:
    from clawstore.store.store import Store


@dataclass(frozen=True)
class StoreStats:
    objects: int
    logical_bytes: int
    stored_bytes: int

    @property
    def ratio(self) -> float:
        """logical / stored (higher is better); 1.0 for an empty store."""
        return self.logical_bytes / self.stored_bytes if self.stored_bytes else 1.0


def store_stats(store: Store) -> StoreStats:
    count = logical = stored = 0
    for oid in store.iter_objects():
        try:
            obj_logical, obj_stored = store.object_sizes(oid)
        except MissingObjectError:  # removed while we counted (gc)
            continue
        except CorruptObjectError:  # unreadable header: count its bytes, fsck reports it
            obj_logical, obj_stored = 0, store.object_path(oid).stat().st_size
        count += 1
        logical += obj_logical
        stored += obj_stored
    return StoreStats(count, logical, stored)
