"""A head's parts are read without decoding their nodes' planning views (heads.head_nodes): the same nodes, values
and key order, as decoding each part whole and dropping the views; a part of another shape is read whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawstore.errors import StoreError
from clawstore.query import heads
from clawstore.store import Store
from clawstore.values import jsontext

ID = "blake3:" + "c" * 64


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def parted_head(store: Store, parts: list[bytes], actions: list[Any]) -> dict[str, Any]:
    return {"node_parts": [store.put_bytes(part) for part in parts], "node_actions": actions}


def read_whole(store: Store, doc: dict[str, Any]) -> list[Any]:
    """What head_nodes gave before: each part decoded whole, each node copied without its planning view."""
    found = [jsontext.loads(store.get_bytes(part_id)) for part_id in doc["node_parts"]]
    nodes = [node for part in found for node in part["nodes"]]
    actions = [a for a, n in doc["node_actions"] for _ in range(n)]
    out = []
    for node, action in zip(nodes, actions, strict=True):
        if isinstance(node, dict):
            node = {**{k: v for k, v in node.items() if k != "record_doc"}, **({"action": action} if action else {})}
        out.append(node)
    return out


def test_a_part_read_without_its_planning_views_gives_the_nodes_decoding_it_whole_gives(store: Store) -> None:
    parts = [
        # keys in stored order, the view between them, a key twice (the last value wins, at the first's place),
        # a number past a double (Python's parser reads infinity), a lone surrogate, nested values
        b'{"head_part":1,"nodes":[{"address":{"case_id":"c","repetition":0},"key":"' + ID.encode() + b'",'
        b'"kind":"run","record_doc":{"x":[1,2,{"y":null}]},"record":"' + ID.encode() + b'"},'
        b'{"kind":"judge","kind":"result","status":null,"n":1e400,"record_doc":null}]}',
        b'{"head_part":1,"nodes":[{"record_doc":{},"kind":"checks","address":{"model_id":"m\\u00e9"}}]}',
        b'{"head_part":1,"nodes":[{"error":{"code":"E","message":"\\ud800"},"record_doc":1}]}',
    ]
    for part in parts[:2]:
        heads._PART.decode(part)  # (read by the values, not whole; msgspec refuses the lone surrogate: read whole)
    doc = parted_head(store, parts, [["exec", 2], [None, 1], ["fail", 1]])
    got = list(heads.head_nodes(doc, heads.StoredRecords(store)))
    want = read_whole(store, doc)
    assert got == want
    assert [list(node) for node in got] == [list(node) for node in want]  # (key order: node signatures read it)
    assert got[1]["kind"] == "result" and got[1]["n"] == float("inf") and got[3]["error"]["message"] == "\ud800"
    assert all("record_doc" not in node for node in got)


@pytest.mark.parametrize("part", [
    b'{"head_part":1,"other":2,"nodes":[{"kind":"run","record_doc":{}}]}',  # a key headdoc does not write
    b'{"nodes":[{"kind":"run","record_doc":{}}, 3]}',  # a node that is not an object
])
def test_a_part_of_another_shape_is_read_whole_to_the_same_nodes(store: Store, part: bytes) -> None:
    count = len(jsontext.loads(part)["nodes"])
    doc = parted_head(store, [part], [["exec", count]])
    assert list(heads.head_nodes(doc, heads.StoredRecords(store))) == read_whole(store, doc)


@pytest.mark.parametrize("part", [b'[1]', b'{"head_part":1}', b'{"nodes":{}}'])
def test_a_part_that_is_not_one_still_stops_the_head(store: Store, part: bytes) -> None:
    doc = parted_head(store, [part], [["exec", 1]])
    with pytest.raises(StoreError, match="is not a part of a campaign head"):
        list(heads.head_nodes(doc, heads.StoredRecords(store)))


def test_a_missing_part_stops_the_head(store: Store) -> None:
    doc = {"node_parts": [ID], "node_actions": [["exec", 1]]}
    with pytest.raises(StoreError, match="is not a part of a campaign head"):
        list(heads.head_nodes(doc, heads.StoredRecords(store)))
