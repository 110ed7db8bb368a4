"""The view's walk of a head (report/view_data.py `_head_nodes`): each part decoded straight to typed nodes gives the
nodes read_head gives (their actions too), and a hostile part the same one-line error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.view_bench import CAMPAIGN, write_campaign
from clawstore.errors import StoreError
from clawstore.report.view_data import _head_nodes
from clawstore.store import Store, documents
from clawstore.store.headdoc import iter_parts

FIELDS = ("kind", "key", "address", "record", "action", "record_doc", "quarantined")


def _read_head_nodes(store: Store, head_id: str, top: Any) -> list[documents.HeadNode]:
    """The nodes as read_head gives them, part by part (the view's walk before session 49)."""
    return [node for at, part in enumerate(iter_parts(top, store.get_json))
            for node in documents.read_head({"nodes": part}, f"campaign head {head_id} part {at}").nodes]


def _fields(nodes: Any) -> list[tuple[Any, ...]]:
    return [tuple(getattr(node, name) for name in FIELDS) for node in nodes]


def test_a_campaign_heads_nodes_are_read_heads(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    write_campaign(store, runs=120, models=2)
    head = str(store.get_ref(f"campaigns/{CAMPAIGN['id']}"))
    top = store.get_json(head)
    assert top.get("node_parts") and top.get("node_actions")  # (a head in parts, its actions run-length encoded)
    expected = _fields(_read_head_nodes(store, head, top))
    assert len(expected) == 600 and {row[4] for row in expected} == {"exec"}  # (120 runs: two judgements each)
    assert _fields(_head_nodes(store, head, top)) == expected


def _head(store: Store, nodes: list[Any], actions: list[Any] | None = None) -> tuple[str, dict[str, Any]]:
    top = {"node_parts": [store.put_json({"nodes": nodes})], "node_actions": actions or [[None, len(nodes)]]}
    return store.put_json(top), top


GOOD = {"kind": "run", "key": "blake3:" + "1" * 64, "address": {"model_id": "m", "case_id": "c"},
        "record": "blake3:" + "2" * 64, "record_doc": {"status": "success"}}


@pytest.mark.parametrize(("nodes", "actions"), [
    ([GOOD, {**GOOD, "record": 5}], None),  # a field of another type
    ([GOOD, {**GOOD, "address": None}], None),
    ([GOOD, {**GOOD, "quarantined": 3}], None),
    ([GOOD, {**GOOD, "record_doc": [1]}], None),
    ([{**GOOD, "kind": 5}], None),
    ([GOOD, {"kind": "run", "key": "blake3:" + "1" * 64}], None),  # a field missing
    ([GOOD, [1]], None),  # not an object
    ([GOOD, GOOD], [["exec", 1], [7, 1]]),  # an action that is not a string
    ([GOOD, GOOD], [["exec", 1]]),  # actions that do not cover the nodes
])
def test_a_hostile_part_gives_read_heads_error(tmp_path: Path, nodes: list[Any], actions: list[Any] | None) -> None:
    store = Store(tmp_path / "store")
    head, top = _head(store, nodes, actions)
    with pytest.raises(StoreError) as before:
        _read_head_nodes(store, head, top)
    with pytest.raises(StoreError) as now:
        list(_head_nodes(store, head, top))
    assert str(now.value) == str(before.value)


def test_a_part_with_other_fields_and_a_null_action_reads_as_before(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    nodes = [{**GOOD, "extra": [1, {"x": 2}], "action": "skip", "quarantined": "why"}, {**GOOD, "record": None}]
    head, top = _head(store, nodes, [[None, 1], ["reuse", 1]])
    assert _fields(_head_nodes(store, head, top)) == _fields(_read_head_nodes(store, head, top))
    assert [node.action for node in _head_nodes(store, head, top)] == ["skip", "reuse"]
