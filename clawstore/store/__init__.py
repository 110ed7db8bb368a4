"""The content-addressed store: objects, trees, action cache, refs, leases, fsck.

Other layers use `Store` (contract in docs/design/contracts.md, on-disk format in docs/store.md).
"""

from clawstore.store.core.ids import BadObjectIdError, check_oid, is_oid, oid_of
from clawstore.store.core.locks import LeaseInfo
from clawstore.store.core.packfile import PackCheckError
from clawstore.store.documents import ArchiveManifest, RecordDoc
from clawstore.store.face import (
    ActionCache,
    ActionReader,
    ObjectReader,
    ObjectWriter,
    RefReader,
    Refs,
    StoreReader,
    Transfer,
)
from clawstore.store.refs import ANY, RefConflict
from clawstore.store.store import Store
from clawstore.store.trees import NotATreeError, TreeEntry, UnsafeTreeError

__all__ = [
    "ANY",
    "ArchiveManifest",
    "RecordDoc",
    "ActionCache",
    "ActionReader",
    "ObjectReader",
    "ObjectWriter",
    "RefReader",
    "Refs",
    "StoreReader",
    "Transfer",
    "BadObjectIdError",
    "LeaseInfo",
    "NotATreeError",
    "PackCheckError",
    "RefConflict",
    "Store",
    "TreeEntry",
    "UnsafeTreeError",
    "check_oid",
    "is_oid",
    "oid_of",
]
