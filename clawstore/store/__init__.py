"""The content-addressed store: objects, trees, action cache, refs, leases, fsck.

Other layers use `Store` (contract in docs/design/contracts.md, on-disk format in docs/store.md).

Its names are imported on first use (as clawstore.providers' client is): a command answered from its build's stamp
reads a few of the store's files (store/documents.py, refs.py) and never opens a Store (~15 ms of its start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawstore.values.lazy_names import lazy_names

if TYPE_CHECKING:
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

# Each exported name's module.
_MODULES = {
    **dict.fromkeys(("BadObjectIdError", "check_oid", "is_oid", "oid_of"), "core.ids"),
    "LeaseInfo": "core.locks",
    "PackCheckError": "core.packfile",
    **dict.fromkeys(("ArchiveManifest", "RecordDoc"), "documents"),
    **dict.fromkeys(("ActionCache", "ActionReader", "ObjectReader", "ObjectWriter", "RefReader", "Refs", "StoreReader",
                     "Transfer"), "face"),
    **dict.fromkeys(("ANY", "RefConflict"), "refs"),
    "Store": "store",
    **dict.fromkeys(("NotATreeError", "TreeEntry", "UnsafeTreeError"), "trees"),
}


__getattr__ = lazy_names(__name__, _MODULES)


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
