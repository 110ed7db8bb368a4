"""The store's typed face: a Store is every Protocol the other layers ask for."""

from __future__ import annotations

import inspect
from typing import Protocol

from clawstore.store import ObjectReader, Store, face


def test_store_satisfies_every_protocol(store: Store) -> None:
    protocols = [value for value in vars(face).values()
                 if inspect.isclass(value) and Protocol in value.__mro__ and value.__module__ == face.__name__
                 and value is not face.ArrivingContents]
    assert {"ObjectReader", "StoreReader", "Transfer"} <= {protocol.__name__ for protocol in protocols}
    for protocol in protocols:
        assert isinstance(store, protocol), protocol.__name__
    oid = store.put_bytes(b"through the face")
    reader: ObjectReader = store
    assert reader.get_bytes(oid) == b"through the face"


def test_what_arrives_is_read_through_the_face(store: Store) -> None:
    """A pull checks entries against what arrives (named whole, as listings name them), read through
    `face.arriving_contents`."""
    oid = store.put_bytes(b"already here")
    contents = face.arriving_contents(store, {}, {"blake3:" + "ab" * 32})
    assert isinstance(contents, face.ArrivingContents)
    assert contents.has(oid) and contents.has("blake3:" + "ab" * 32) and not contents.has("blake3:" + "cd" * 32)
    assert contents.entry_problem("blake3:" + "cd" * 32, oid) == "its record is not a record"
