"""The store's typed face: a Store is every Protocol the other layers ask for."""

from __future__ import annotations

import inspect
from typing import Protocol

from clawstore.store import ObjectReader, Store, face


def test_store_satisfies_every_protocol(store: Store) -> None:
    protocols = [value for value in vars(face).values()
                 if inspect.isclass(value) and Protocol in value.__mro__ and value.__module__ == face.__name__]
    assert {"ObjectReader", "StoreReader", "Transfer"} <= {protocol.__name__ for protocol in protocols}
    for protocol in protocols:
        assert isinstance(store, protocol), protocol.__name__
    oid = store.put_bytes(b"through the face")
    reader: ObjectReader = store
    assert reader.get_bytes(oid) == b"through the face"
