"""A node with a legacy key (a price was in it: graph/plan.py Node.legacy) has its record under both keys: one reused
under the legacy key is recorded under the key now as well, and the build names that copy, so that a later price edit,
which changes the legacy key, still finds it (a gc in between too); one executed is recorded under the legacy key as
well, so that an older claw building beside this one, which waited for the node's claim under that key, reuses it
instead of paying again (builder/claimed.py; docs/building.md, Keys)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawstore.graph.plan import Node

if TYPE_CHECKING:
    from clawstore.store.store import Store


def record_under_key_now(store: Store, node: Node) -> None:
    """The record `node` reuses under its legacy key, under its key now (`Node.keyed_now`), and the node named by that
    copy (call it before the node is logged): the head names the copy, so gc keeps its entry (a copy no head named was
    collected after the grace period, and the next price edit paid again). The legacy entry stays until gc; the head is
    written after the copy is durable (the build log's flush)."""
    now = node.keyed_now
    if now is None or node.record_id is None:
        return
    from clawstore.builder.buildlog import planning_view

    record = store.get_json(node.record_id)  # (the head holds a record's planning view only)
    record_id, copy = record_as(store, record, *now)
    node.key, node.document, node.document_bytes = now
    node.record_id, node.record, node.keyed_now = record_id, planning_view(copy), None


def record_under_legacy_key(store: Store, node: Node, record: dict[str, Any]) -> None:
    """The record `node` was just executed into (under its key now), under its legacy key too, when it is a result
    (a failure there would only have an older claw retry what it retries anyway). Not under a node's earlier key
    (`Node.earlier`: an llm_probe run's before session 74, a judgement's before 75, an OpenClaw run's before 77): that
    would write every run and judgement twice (docs/building.md, Keys)."""
    if node.legacy is not None and record.get("cacheable"):
        record_as(store, record, *node.legacy)


def record_as(store: Store, record: dict[str, Any], key: str, document: dict[str, Any],
              data: bytes | None) -> tuple[str, dict[str, Any]]:
    """`record` for another key of the same node: the same outputs and metrics (what was paid, once, by the build that
    made it), that key's input document. Written as any record is: its input document, then the record, then the
    entry, in one batch (the build's group commit makes it durable with the rest of its window). Its id and itself."""
    with store.batch():
        input_id = store.put_bytes(data) if data is not None else store.put_json(document)
        outputs = dict(record.get("outputs") or {})
        if "input_document" in outputs:
            outputs["input_document"] = input_id
        copy = {**record, "key": key, "input": key, "outputs": outputs}
        return store.put_action(key, copy), copy
