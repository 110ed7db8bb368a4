"""A node stores as its input document the canonical bytes its key was computed from at planning (graph/plan.py
`put_input`), instead of encoding the document a second time: the same objects, one encoding a node less."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from clawstore.graph.keys import keyed_document
from clawstore.graph.plan import Node, put_input
from clawstore.store import Store
from clawstore.store.core.objects import ObjectStore
from clawstore.testing.standin import StandIn
from clawstore.values.canonical import canonical_json
from tests.support.claw import Claw
from tests.support.judging import JUDGE, build, eval_profile, judge_reply
from tests.support.workspace import Workspace


def test_no_node_encodes_its_input_document_again(ws: Workspace, standin: StandIn, claw: Claw,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    eval_profile(ws, repetitions=2)
    standin.script(JUDGE, judge_reply(7))
    encoded: set[str] = set()  # ids put_json made: JSON encoded at the put
    original = ObjectStore.put_json

    def put_json(self: ObjectStore, value: Any) -> str:
        oid = original(self, value)
        encoded.add(oid)
        return oid

    monkeypatch.setattr(ObjectStore, "put_json", put_json)
    assert build(claw)[0] == 0
    store = Store(Path(os.environ["CLAW_STORE"]))
    kinds = set()
    for key, _ in store.iter_actions():
        record = store.get_action(key)
        kinds.add(record.kind)
        assert record.outputs["input_document"] == key and key not in encoded
        assert store.get_bytes(key) == canonical_json(store.get_json(key))  # the document its key hashes
    assert kinds == {"run", "checks", "judge", "result"}
    store.close()


def test_put_input_stores_the_kept_bytes_and_a_released_node_keeps_none(tmp_path: Path) -> None:
    document = {"kind": "checks", "version": 1, "cost": 1e-05}
    key, data = keyed_document(document)
    store = Store(tmp_path / "store")
    node = Node("checks", {"model_id": "m", "case_id": "c", "repetition": 0}, document, key, document_bytes=data)
    assert put_input(store, node) == key and store.get_bytes(key) == data == canonical_json(document)
    node.release()
    assert node.document_bytes is None
    unkept = Node("checks", {"model_id": "m", "case_id": "c", "repetition": 0}, document, key)
    assert put_input(store, unkept) == key  # (a node made without them: its document encoded)
    store.close()
