"""Campaign heads in parts (clawstore/store/headdoc.py): where parts end depends only on addresses."""

from __future__ import annotations

import io
from typing import Any

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.headdoc import (
    PART_MAX,
    inline_nodes,
    iter_nodes,
    iter_parts,
    part_ids,
    read_head_doc,
    split_nodes,
    write_head,
    write_inline,
)
from clawstore.store.reach import Reach
from clawstore.values import jsontext
from clawstore.values.canonical import canonical_json


def _node(case: int, kind: str = "run", record: str = "r0") -> dict[str, Any]:
    return {"kind": kind, "key": f"blake3:{case:064x}", "record": record,
            "address": {"case_id": f"case_{case:05d}", "model_id": "m1", "repetition": 0}}


def _parts_of(nodes: list[dict[str, Any]]) -> list[str]:
    """Each part as a comparable value."""
    return [repr(part) for part in split_nodes(nodes)]


def test_parts_end_at_the_same_addresses_whatever_else_changes() -> None:
    nodes = [_node(i) for i in range(0, 6000, 2)]
    before = _parts_of(nodes)
    assert 20 < len(before) < 200  # about 64 nodes a part
    assert [n for part in split_nodes(nodes) for n in part] == nodes  # order kept, nothing lost

    changed = [dict(n, record="r1") if n["address"]["case_id"] == "case_03000" else n for n in nodes]
    assert len(set(_parts_of(changed)) - set(before)) == 1  # a node's new record: its part only

    inserted = sorted([*nodes, _node(3001)], key=lambda n: n["address"]["case_id"])
    assert len(set(_parts_of(inserted)) - set(before)) == 1  # a new address: its part only

    removed = [n for n in nodes if n["address"]["case_id"] != "case_03000"]
    assert len(set(_parts_of(removed)) - set(before)) <= 1  # (a boundary node removed: two parts join)


def test_a_part_never_exceeds_its_bound() -> None:
    nodes = [_node(7)] * (3 * PART_MAX)  # the same address over and over: never a boundary, or always
    assert max(len(part) for part in split_nodes(nodes)) <= PART_MAX


def test_a_head_round_trips_and_reaches_its_parts(store: Store) -> None:
    nodes = [_node(i) for i in range(500)]
    fields = {"build_id": "b1", "campaign": {"id": "c"}, "nodes": "ignored", "node_count": -1}
    head_id = write_head(store, fields, nodes)
    stored = store.get_json(head_id)
    assert stored["head_version"] == 2 and stored["node_count"] == 500 and "nodes" not in stored
    parts = part_ids(stored)
    assert len(parts) > 2 and all(store.has(p) for p in parts)
    head = read_head_doc(store, head_id)
    assert head["nodes"] == nodes and head["build_id"] == "b1" and "node_parts" not in head
    reach = Reach(store)
    reach.mark([head_id])
    assert {p.removeprefix("blake3:") for p in parts} <= reach.marked  # gc keeps them, export ships them


def test_an_unchanged_part_is_the_same_object(store: Store) -> None:
    nodes = [_node(i) for i in range(2000)]
    first = part_ids(store.get_json(write_head(store, {"build_id": "b1"}, nodes)))
    nodes[1000] = dict(nodes[1000], record="r2")
    second = part_ids(store.get_json(write_head(store, {"build_id": "b2"}, nodes)))
    assert len(set(second) - set(first)) == 1 and len(second) == len(first)


def test_a_version_1_head_is_read_as_it_is(store: Store) -> None:
    old = {"build_id": "b0", "head_version": 1, "nodes": [_node(1)]}
    assert read_head_doc(store, store.put_json(old)) == old
    assert inline_nodes([1, 2], store.get_json) == [1, 2]  # not a head: unchanged
    assert part_ids(old) == []


def test_a_nodes_action_lives_in_the_head_not_in_its_part(store: Store) -> None:
    built = [dict(_node(i), action="exec") for i in range(300)]
    first = write_head(store, {"build_id": "b1"}, built)
    rebuilt = [dict(n, action="reuse") for n in built]  # the next build reused every node
    rebuilt[7]["action"] = "exec"
    second = write_head(store, {"build_id": "b2"}, rebuilt)
    assert part_ids(store.get_json(second)) == part_ids(store.get_json(first))  # not one part rewritten
    assert store.get_json(second)["node_actions"] == [["reuse", 7], ["exec", 1], ["reuse", 292]]
    assert read_head_doc(store, second)["nodes"] == rebuilt and read_head_doc(store, first)["nodes"] == built


def test_actions_that_do_not_cover_the_nodes_are_refused(store: Store) -> None:
    head = store.get_json(write_head(store, {"build_id": "b1"}, [dict(_node(i), action="exec") for i in range(10)]))
    for runs in ([["exec", 9]], [["exec", 11]], [["exec", 10**18]], [["exec", -1], ["exec", 11]], "exec", None):
        with pytest.raises(StoreError, match="node_actions"):
            inline_nodes({**head, "node_actions": runs}, store.get_json)


def test_parts_read_one_at_a_time_give_the_inline_nodes(store: Store) -> None:
    rebuilt = [dict(_node(i), action="reuse" if i % 7 else "exec") for i in range(300)]
    head = store.get_json(write_head(store, {"build_id": "b2"}, rebuilt))
    parts = list(iter_parts(head, store.get_json))
    assert len(parts) == len(part_ids(head)) > 2  # (a reader holds one part, not the head)
    assert [n for part in parts for n in part] == read_head_doc(store, store.put_json(head))["nodes"]
    old = {"build_id": "b0", "head_version": 1, "nodes": [_node(1)]}
    assert list(iter_parts(old, store.get_json)) == [[_node(1)]]
    for runs in ([["exec", 299]], [["exec", 301]], [["exec", 0], ["exec", 300]], "exec"):
        with pytest.raises(StoreError, match="node_actions"):
            list(iter_parts({**head, "node_actions": runs}, store.get_json))


def test_a_head_streams_one_part_at_a_time_into_the_bytes_of_its_inline_form(store: Store) -> None:
    nodes = [dict(_node(i), action="exec" if i % 3 else "reuse") for i in range(700)]
    fields = {"build_id": "b1", "campaign": {"id": "c"}, "started_at": "nodes", "zz": ["nodes"]}
    head = store.get_json(write_head(store, fields, nodes))
    read: list[str] = []

    def read_part(oid: str) -> Any:
        read.append(oid)
        return store.get_json(oid)

    stream = iter_nodes(head, read_part)
    assert next(stream) == nodes[0] and len(read) == 1  # the first part only, not the campaign
    out = io.BytesIO()
    write_inline(out, head, store.get_json)
    assert out.getvalue() == canonical_json(inline_nodes(head, store.get_json))
    assert jsontext.loads(out.getvalue())["nodes"] == nodes
    with pytest.raises(StoreError, match="node_actions"):
        list(iter_nodes({**head, "node_actions": [["exec", 699]]}, store.get_json))
    with pytest.raises(StoreError, match="not a campaign head"):
        list(iter_nodes({"build_id": "b1"}, store.get_json))
