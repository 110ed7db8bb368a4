"""The read commands read a campaign head lazily (store/headdoc.py `lazy_part`): each part decoded into nodes whose
record_doc stays text until a node's key is the key planned. What they answer is what the head typed node by node
(documents.read_head_node) answers, for a campaign every node of which is stale and for one partly fresh; they type no
node field by field; and a part not as builds write it is read whole, each damage said as before.

Real in-process `claw` commands on a workspace built against the stand-in provider (tests/builder/test_stale_reads.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawstore.builder.buildlog import head_ref
from clawstore.errors import StoreError
from clawstore.graph import explain
from clawstore.graph.explain import HeadByCases
from clawstore.store import Store, documents, headdoc
from clawstore.testing.standin import StandIn
from tests.builder.test_stale_reads import _answers, _stale
from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every head read as before: each node typed by read_head_node, its record_doc decoded."""
    init = HeadByCases.__init__

    def eager(self: HeadByCases, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, "lazy": False})

    monkeypatch.setattr(HeadByCases, "__init__", eager)


def _typed_by_field(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The head nodes read_head_node types from now on (counted)."""
    typed: list[int] = []
    read_head_node = documents.read_head_node

    def counted(node: Any, where: str, at: int) -> documents.HeadNode:
        typed.append(at)
        return read_head_node(node, where, at)

    monkeypatch.setattr(documents, "read_head_node", counted)
    return typed


@pytest.mark.parametrize("edit", ["provider", "one case"])
def test_read_commands_answer_from_a_lazy_head_what_the_typed_head_answers(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        edit: str) -> None:
    store = Path(env["CLAW_STORE"])
    _stale(ws, claw, standin, monkeypatch)
    if edit == "one case":  # (the others fresh: their records taken from the head, each record_doc decoded)
        monkeypatch.delenv("OPENROUTER_BASE_URL")
        monkeypatch.setenv("OPENROUTER_BASE_URL", f"{standin.url}/v1")
        ws.case("c03", "Question 3, edited")
    typed = _typed_by_field(monkeypatch)
    lazy = _answers(claw, store)
    assert typed == []  # (main: every node of the head, each command)
    _eager(monkeypatch)
    assert _answers(claw, store) == lazy
    assert typed  # (the same answers from every node typed)
    status = lazy[0][1]
    if edit == "one case":
        assert "m1     run     14     2      0       0" in status, status
    else:
        assert "m1     run     0      16     0       0" in status, status


def _damaged_head(store: Store, campaign_id: str, damage: Any) -> str:
    """A ref to a copy of the campaign's head whose first part's first node `damage` changed (the head's action for
    that node instead, for ACTION)."""
    doc = store.get_json(str(store.get_ref(head_ref(campaign_id))))
    parts = headdoc.part_ids(doc)
    first = store.get_json(parts[0])
    if damage is ACTION:
        (action, count), *rest = doc["node_actions"]
        doc["node_actions"] = [[5, 1], *([[action, count - 1]] if count > 1 else []), *rest]
    else:
        first["nodes"][0] = damage(dict(first["nodes"][0]))
    ref = "refs/test/damaged"
    store.set_ref(ref, store.put_json({**doc, "node_parts": [store.put_json(first), *parts[1:]]}))
    return ref


def _read_all(store: Store, ref: str, lazy: bool) -> str:
    head = HeadByCases(store, ref, lazy=lazy)
    try:
        head.finish()  # (every node read)
    except (StoreError, explain.HeadOutOfOrder) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "read"


def ACTION(node: Any) -> Any:  # (the head's action for the node a number)
    return node


DAMAGES = {
    "the head's action a number": ACTION,
    "record_doc a list": lambda node: {**node, "record_doc": [1]},
    "record_doc a string": lambda node: {**node, "record_doc": "x"},
    "record_doc absent": lambda node: {k: v for k, v in node.items() if k != "record_doc"},
    "kind a number": lambda node: {**node, "kind": 3},
    "key absent": lambda node: {k: v for k, v in node.items() if k != "key"},
    "address a list": lambda node: {**node, "address": []},
    "record a number": lambda node: {**node, "record": 1},
    "quarantined an object": lambda node: {**node, "quarantined": {}},
    "action in the node": lambda node: {**node, "action": "reused"},
    "another field": lambda node: {**node, "extra": {"a": [1, 2]}},
    "not an object": lambda node: [node],
}


def test_head_parts_not_as_builds_write_them_are_said_as_before(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store_root = Path(env["CLAW_STORE"])
    _stale(ws, claw, standin, monkeypatch)
    said: dict[str, tuple[str, str]] = {}
    with Store(store_root) as store:
        for name, damage in DAMAGES.items():  # (one build for them all)
            ref = _damaged_head(store, "main__rp__ev", damage)
            said[name] = (_read_all(store, ref, lazy=False), _read_all(store, ref, lazy=True))
    assert {name: typed for name, (typed, _) in said.items()} == {name: lazy for name, (_, lazy) in said.items()}
    for name, (typed, _) in said.items():
        if name in ("another field", "record_doc absent", "action in the node"):
            assert typed == "read", (name, typed)
        else:
            assert "is damaged" in typed, (name, typed)


def test_a_lazy_nodes_record_doc_is_the_typed_nodes(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store_root = Path(env["CLAW_STORE"])
    _stale(ws, claw, standin, monkeypatch)
    with Store(store_root) as store:
        ref = head_ref("main__rp__ev")
        _, whole = explain.read_head(store, ref)
        cases = sorted({node.address["case_id"] for node in whole.values()})
        typed = HeadByCases(store, ref, lazy=False).window(cases)
        lazy = HeadByCases(store, ref, lazy=True).window(cases)
    assert typed == whole and typed.keys() == lazy.keys()
    assert len(typed) == len(cases) * 2 * 2 * 5  # (models, repetitions; run, checks, result, 2 judgements)
    for address, node in typed.items():
        other = lazy[address]
        assert type(other) is headdoc.LazyHeadNode
        assert (other.kind, other.key, other.address, other.record, other.action, other.quarantined) == (
            node.kind, node.key, node.address, node.record, node.action, node.quarantined)
        assert other.record_view() == other.record_doc == node.record_doc is not None
