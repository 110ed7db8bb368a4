"""`--batch` for the judge layer: judgements go to the provider's Batch API (builder/batching.py).

A batch line's answer is recorded exactly as a synchronous judgement is (`EvalLayer.judge_with`: the
same contract check, the same record): it is the judge's first attempt; an invalid answer is asked
again synchronously, as the synchronous path retries it. Its cost is the provider's reported cost,
or the judge's declared `pricing` times its `batch` factor (`cost_source: priced`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from clawstore.builder import batch_doc
from clawstore.builder.batching import Batchable, Batcher, Pass, priced_batch_cost
from clawstore.builder.claimed import Adopted, stored_meanwhile
from clawstore.graph.plan import Node
from clawstore.graph.records import utc_now
from clawstore.machine_settings import batch_poll_seconds
from clawstore.providers.batch_api import LineAnswer
from clawstore.store.ids import oid_hex

if TYPE_CHECKING:
    from clawstore.builder.batch_doc import BatchDoc

EvalLayer = Any  # builder/eval_layer.py's (which imports this module)

BUSY_WAIT_S = 0.2  # another build holds a node's claim: it is submitting or executing it


def batch_judges(layer: EvalLayer, judges: list[Node], log: Any, options: Any, to_submit: list[Node]) -> set[int]:
    """Collect what batches answered for `judges`, submit those of `to_submit` no batch covers; with
    `options.wait`, until none is pending. Returns the ids of the nodes handled here (recorded,
    adopted, or pending); the caller runs the others one by one."""
    submitting = {id(n) for n in to_submit}
    if not judges:
        return set()
    handled: set[int] = set()
    progress = layer._progress
    batcher = Batcher(layer.store, log.claims, kind="judge", campaign_id=layer.campaign.campaign_id,
                      build_id=log.build_id)

    def record(node: Node, answer: LineAnswer, doc: BatchDoc) -> tuple[str, dict[str, Any]]:
        return record_line(layer, node, answer, doc)

    def recorded(node: Node, outcome: tuple[str, dict[str, Any]] | Adopted) -> None:
        adopted = isinstance(outcome, Adopted)
        node.record_id, node.record = (outcome.record_id, outcome.record) if adopted else outcome
        node.extra.pop("batch", None)
        good = bool(node.record.get("cacheable"))
        node.action = ("reuse" if adopted else "exec") if good else "fail"
        log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record)
        progress.finished(node, node.record["status"], good and node.record["status"] == "success")
        handled.add(id(node))

    progress.phase("judges (batch)", judges, [])
    try:
        while True:
            result = Pass()
            batcher.collect(_open(judges, handled), record, recorded, result)
            busy = _submit(layer, batcher, [n for n in _open(judges, handled) if id(n) in submitting], recorded,
                           result)
            batcher.pending_for(_open(judges, handled), result)
            progress.batches(result.lines + [f"submitted batch {d.batch_id} ({d.model}, {len(d.keys)} request(s))"
                                             for d in result.submitted])
            if busy and any(oid_hex(n.key) not in result.pending for n in busy):
                time.sleep(BUSY_WAIT_S)
                continue
            if not (options.wait and result.pending):
                break
            time.sleep(float(getattr(options, "batch_poll_s", None) or batch_poll_seconds()))
    finally:
        batcher.close()
    for node in _open(judges, handled):
        doc = result.pending.get(oid_hex(node.key))
        if doc is not None:
            node.extra["batch"] = doc.name
            handled.add(id(node))
    return handled


def _open(nodes: list[Node], handled: set[int]) -> list[Node]:
    return [n for n in nodes if id(n) not in handled]


def _submit(layer: EvalLayer, batcher: Batcher, nodes: list[Node], recorded: Any, result: Pass) -> list[Node]:
    """Submit the nodes no batch covers; returns those another build holds (try again shortly)."""
    covered = batch_doc.covered_keys(batch_doc.pending(layer.store))
    items = []
    for node in nodes:
        if oid_hex(node.key) in covered:
            continue
        adopted = stored_meanwhile(layer.store, node)
        if adopted is not None:
            recorded(node, adopted)
            continue
        node.extra["batch_body"] = body = layer.judge_request(node)  # (kept: collected by this process, not made again)
        items.append(Batchable(node, layer._endpoint(node.extra["judge"]), body))
    busy = batcher.submit(items, result)
    return [item.node for item in items if item.node.key in busy]


def record_line(layer: EvalLayer, node: Node, answer: LineAnswer, doc: BatchDoc) -> tuple[str, dict[str, Any]]:
    """Record one batch line as the judgement of `node` (the caller holds the node's claim)."""
    began = time.monotonic()
    judge = node.extra["judge"]
    endpoint, timeout, retries = layer._judge_transport(judge)
    first = [answer]
    batch = {"name": doc.name, "batch_id": doc.batch_id, "cost_source": "reported"}

    def chat(request: dict[str, Any]) -> Any:
        if not first:  # the answer broke the judge contract: asked again, as the synchronous path does
            return layer.client.chat(endpoint, request, timeout=timeout, retries=retries)
        line = first.pop()
        if line.error is not None:
            raise line.error
        assert line.result is not None
        if line.result.usage.cost_usd is not None:
            return line.result
        usage = line.result.usage
        priced = priced_batch_cost((judge.model_extra or {}).get("pricing"), usage.input_tokens,
                                   usage.output_tokens)
        batch["cost_source"] = "unknown" if priced is None else "priced"  # never shown as zero
        return line.result if priced is None else dataclasses.replace(
            line.result, usage=dataclasses.replace(usage, cost_usd=priced))

    body = node.extra.pop("batch_body", None) or layer.judge_request(node)  # the same bytes either way
    return layer.judge_with(node, chat, body, utc_now(), began, doc.build_id, extra_summary={"batch": batch})
