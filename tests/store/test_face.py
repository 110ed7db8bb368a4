"""The store's typed face: a Store is every Protocol the other layers ask for."""

from __future__ import annotations

from clawstore.store import (
    ActionCache,
    ActionReader,
    ObjectReader,
    ObjectWriter,
    RefReader,
    Refs,
    Store,
    StoreReader,
    Transfer,
)


def test_store_satisfies_every_protocol(store: Store) -> None:
    for face in (ObjectReader, ObjectWriter, ActionReader, ActionCache, RefReader, Refs, StoreReader, Transfer):
        assert isinstance(store, face), face.__name__
    oid = store.put_bytes(b"through the face")
    reader: ObjectReader = store
    assert reader.get_bytes(oid) == b"through the face"
