"""The store's typed face: a Store is every Protocol the other layers ask for."""

from __future__ import annotations

from clawstore.store import ActionCache, ObjectReader, ObjectWriter, Refs, Store, Transfer


def test_store_satisfies_every_protocol(store: Store) -> None:
    for face in (ObjectReader, ObjectWriter, ActionCache, Refs, Transfer):
        assert isinstance(store, face), face.__name__
    oid = store.put_bytes(b"through the face")
    reader: ObjectReader = store
    assert reader.get_bytes(oid) == b"through the face"
