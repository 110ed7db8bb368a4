"""A record a build reuses under a node's legacy key (a price was in it: graph/plan.py Node.legacy) is recorded under
the node's key now as well, so that a later price edit, which changes the legacy key, still finds it
(docs/building.md, Keys)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawstore.graph.plan import Node

if TYPE_CHECKING:
    from clawstore.store.store import Store


def record_under_key_now(store: Store, node: Node) -> None:
    """The record `node` reuses, under its key now (`Node.keyed_now`): the same outputs and metrics (what was paid,
    once, by the build that made it), for that key and its input document. Written as any record is (its input
    document, then the record, then the entry, in one batch of the build's group commit); the build still names the
    record under the legacy key, which stays, so a copy lost to a kill costs nothing but another copy next time."""
    now = node.keyed_now
    if now is None or node.record_id is None:
        return
    key, document, data = now
    record = store.get_json(node.record_id)  # (the head holds a record's planning view only)
    with store.batch():
        input_id = store.put_bytes(data) if data is not None else store.put_json(document)
        outputs = dict(record.get("outputs") or {})
        if "input_document" in outputs:
            outputs["input_document"] = input_id
        store.put_action(key, {**record, "key": key, "input": key, "outputs": outputs})
