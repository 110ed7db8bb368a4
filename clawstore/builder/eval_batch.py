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
from clawstore.builder.batching import Batchable, Batcher, Pass, line_estimate, priced_batch_cost
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


def batch_judges(layer: EvalLayer, judges: list[Node], log: Any, options: Any, to_submit: list[Node],
                 budget: Any = None) -> set[int]:
    """Collect what batches answered for `judges`, submit those of `to_submit` no batch covers; with
    `options.wait`, until none is pending. Returns the ids of the nodes handled here (recorded,
    adopted, pending, or skipped for `budget`: --max-cost); the caller runs the others one by one."""
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
        if budget is not None:
            budget.committed.pop(node.key, None)  # settled: the record's cost is in the build log now
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
            wanted = [n for n in _open(judges, handled) if id(n) in submitting]
            busy = _submit(layer, batcher, wanted, recorded, result, budget)
            for node in _over_budget(wanted, result, budget):
                node.action = "skip"
                log.add(node.kind, node.key, None, "skip", node.address, None)
                handled.add(id(node))
                submitting.discard(id(node))
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


def _submit(layer: EvalLayer, batcher: Batcher, nodes: list[Node], recorded: Any, result: Pass,
            budget: Any) -> list[Node]:
    """Submit the nodes no batch covers (with --max-cost, while their estimates fit); returns those
    another build holds (try again shortly)."""
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
        estimate = line_estimate(body, (node.extra["judge"].model_extra or {}).get("pricing"))
        if budget is not None:
            if not budget.room_for(estimate):
                result.over_budget.add(node.key)
                continue
            budget.committed[node.key] = float(estimate or 0.0)  # counted now, settled when collected
        items.append(Batchable(node, layer._endpoint(node.extra["judge"]), body, estimate))
    busy = batcher.submit(items, result)
    if budget is not None:
        sent = {key for doc in result.submitted for key in doc.keys}
        for item in items:  # not sent after all (another build holds it, or it was stored meanwhile)
            if oid_hex(item.node.key) not in sent:
                budget.committed.pop(item.node.key, None)
    return [item.node for item in items if item.node.key in busy]


def _over_budget(nodes: list[Node], result: Pass, budget: Any) -> list[Node]:
    """The nodes --max-cost kept from being submitted (the build says why: `budget.note_skips`)."""
    if budget is None or not result.over_budget:
        return []
    budget.reason = (f"--max-cost {budget.limit_usd:g} USD reached (spent and submitted in batches "
                     f"{budget.spent:.6f} USD); the rest was not submitted")
    return [n for n in nodes if n.key in result.over_budget]


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
