"""One layer's nodes through provider batches: collect what finished, submit the rest, wait if asked.

Shared by the judgements (eval_batch.py) and the single-request runs (run_batch.py); what differs is
how a node's request is made and how an answer is recorded (`BatchKind`). A line's answer reaches the
node's ordinary executor as the provider client would (`FirstAnswer`), so it is recorded exactly as a
synchronous reply is.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawstore.builder import batch_doc
from clawstore.builder.batching import Batchable, Batcher, Pass, forget_recorded, line_estimate, priced_batch_cost
from clawstore.builder.buildlog import planning_view
from clawstore.builder.claimed import Adopted, stored_meanwhile
from clawstore.builder.legacy_keys import record_as
from clawstore.builder.scheduler import interrupts_at_once
from clawstore.graph.plan import Node
from clawstore.host.machine_settings import batch_poll_seconds
from clawstore.providers.batch_api import LineAnswer
from clawstore.providers.endpoint import Endpoint
from clawstore.providers.usage import as_reported
from clawstore.store.core.ids import oid_hex

if TYPE_CHECKING:
    from clawstore.builder.batch_doc import BatchDoc
    from clawstore.builder.clients import ChatClient
    from clawstore.builder.refused import Refusals
    from clawstore.builder.session import Budget, BuildSession
    from clawstore.providers.client import ChatResult
    from clawstore.store.store import Store

BUSY_WAIT_S = 0.2  # another build holds a node's claim: it is submitting or executing it
MAX_SENDS = 2  # a node whose line failed this often in one build is asked one by one (its retries, its error)


@dataclass(frozen=True)
class BatchKind:
    kind: str  # judge | run: the batch documents' kind
    label: str  # the progress phase
    # (endpoint, chat body, declared pricing), or None: this node sends no request (it runs one by one)
    request: Callable[[Node], tuple[Endpoint, dict[str, Any], Any] | None]
    record: Callable[[Node, LineAnswer, BatchDoc], tuple[str, dict[str, Any]]]  # under the node's claim


class FirstAnswer:
    """A provider client whose first chat is the batch line's answer (its cost priced by `pricing` and
    its batch factor when the provider reported none), and whose later ones go to `fallback`. A line
    refused with a final 402 refuses its endpoint for the rest of the build (`refusals`), as a chat
    request's does."""

    def __init__(self, answer: LineAnswer, fallback: ChatClient | None, pricing: Any, doc: BatchDoc,
                 refusals: Refusals | None = None):
        self._answer: LineAnswer | None = answer
        self._fallback = fallback
        self._pricing = pricing
        self._refusals = refusals
        self.summary = {"name": doc.name, "batch_id": doc.batch_id, "cost_source": "reported"}

    def chat(self, endpoint: Endpoint, body: dict[str, Any], timeout: float | None = None,
             retries: int = 5) -> ChatResult:
        line, self._answer = self._answer, None
        if line is None:  # asked again (a judge's invalid answer): as the synchronous path asks
            assert self._fallback is not None, "a client to ask again"
            return self._fallback.chat(endpoint, body, timeout=timeout, retries=retries)
        if line.error is not None:
            if self._refusals is not None:
                self._refusals.note(endpoint, line.error)  # (only a final 402 refuses it)
            raise line.error
        assert line.result is not None
        usage = as_reported(line.result.usage, line.result.raw_usage)  # counts no tokens: unknown, not 0 priced
        if usage.rejected is not None:  # its usage not believed: unknown, not priced from tokens nobody believes
            self.summary["cost_source"] = "unknown"
            return dataclasses.replace(line.result, usage=usage)
        if usage.cost_usd is not None:
            return line.result
        priced = priced_batch_cost(self._pricing, usage.input_tokens, usage.output_tokens)
        self.summary["cost_source"] = "unknown" if priced is None else "priced"  # never shown as zero
        return line.result if priced is None else dataclasses.replace(
            line.result, usage=dataclasses.replace(usage, cost_usd=priced, cost_source="priced"))


def batch_layer(how: BatchKind, session: BuildSession, nodes: list[Node], to_submit: list[Node]) -> set[int]:
    """Collect what batches answered for `nodes`, submit those of `to_submit` no batch covers; with
    `options.wait`, until none is pending. Returns the ids of the nodes handled here (recorded,
    adopted, pending, or skipped for the session's budget: --max-cost); the caller runs the others one
    by one."""
    store, log, options, budget, progress = (session.store, session.log, session.options, session.budget,
                                             session.progress)
    submitting = {id(n) for n in to_submit}
    covered = batch_doc.covered_keys(forget_recorded(store))
    # A node with a legacy key (a price was in it: graph/plan.py Node.legacy) goes by that key here unless a batch
    # stands for its key now: a batch an older claw submitted under it is collected, and one this build submits stands
    # for it in an older claw's eyes too (which waits for that batch instead of asking again). Its record is named
    # under the key now as well (`recorded`); one this layer does not handle gets its key now back.
    # A node's earlier key (graph/plan.py Node.earlier: an llm_probe run's before session 74 or 75, a judgement's
    # before 75) is gone by the same way when a batch stands for it and for neither other key: collected, never
    # submitted, under it; the node is given back its legacy key, if any, for what it does after.
    by_legacy: dict[int, _KeyNow] = {}
    for node in nodes:
        legacy = node.legacy
        # (no batch pending: no earlier key can be covered, and its documents, two a judgement since session 76, are
        # not made)
        if covered and node.earlier is not None and oid_hex(node.key) not in covered and (
                legacy is None or oid_hex(legacy[0]) not in covered):
            node.legacy = next((before for before in node.earlier() if oid_hex(before[0]) in covered), legacy)
        if node.legacy is not None and oid_hex(node.key) not in covered and (
                id(node) in submitting or oid_hex(node.legacy[0]) in covered):
            by_legacy[id(node)] = _by_legacy_key(store, node, legacy)
        else:
            node.legacy = legacy
    nodes = [n for n in nodes if id(n) in submitting or oid_hex(n.key) in covered]  # the rest: not ours
    if not nodes:
        return set()
    handled: set[int] = set()
    failed: dict[str, int] = {}  # node key (hex) -> how often its line failed or expired in this build
    batcher = Batcher(store, session.claims, kind=how.kind, campaign_id=session.campaign_id,
                      build_id=session.build_id, refusals=session.refusals)

    def recorded(node: Node, outcome: tuple[str, dict[str, Any]] | Adopted) -> None:
        adopted = isinstance(outcome, Adopted)
        node.record_id, record = (outcome.record_id, outcome.record) if adopted else outcome
        if budget is not None:
            budget.committed.pop(node.key, None)  # settled: the record's cost is in the build log now
        if node.keyed_now is not None:  # recorded under its legacy key: a price edit changes that key, not this one
            node.record_id, record = record_as(store, record, *node.keyed_now)
            node.key, node.document, node.document_bytes = node.keyed_now
            node.keyed_now = None
        if not adopted:
            progress.warned(node, record)
        node.record, node.batch = planning_view(record), None
        good = bool(node.record.get("cacheable"))
        node.action = ("reuse" if adopted else "exec") if good else "fail"
        log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record)
        progress.finished(node, node.record["status"], good and node.record["status"] == "success")
        handled.add(id(node))

    progress.phase(how.label, nodes, [])
    try:
        while True:
            result = Pass()
            batcher.collect(_open(nodes, handled), how.record, recorded, result)
            for key in result.released:
                failed[key] = failed.get(key, 0) + 1
            submitting -= {id(n) for n in nodes if failed.get(oid_hex(n.key), 0) >= MAX_SENDS}
            wanted = [n for n in _open(nodes, handled) if id(n) in submitting]
            busy = _submit(how, store, batcher, wanted, recorded, result, budget)
            for node in _over_budget(wanted, result, budget):
                if id(node) in by_legacy:
                    _key_now_back(node, by_legacy.pop(id(node)))
                node.action = "skip"
                log.add(node.kind, node.key, None, "skip", node.address, None)
                handled.add(id(node))
                submitting.discard(id(node))
            batcher.pending_for(_open(nodes, handled), result)
            progress.batches(result.lines + [f"submitted batch {d.batch_id} ({d.model}, {len(d.keys)} request(s))"
                                             for d in result.submitted])
            # The waits end on a first Ctrl-C (the build defers one elsewhere until a node's end): nothing to finish
            if busy and any(oid_hex(n.key) not in result.pending for n in busy):
                with interrupts_at_once():
                    time.sleep(BUSY_WAIT_S)
                continue
            if not (options.wait and result.pending):
                break
            with interrupts_at_once():
                time.sleep(float(options.batch_poll_s or batch_poll_seconds()))
    finally:
        batcher.close()
    for node in _open(nodes, handled):
        doc = result.pending.get(oid_hex(node.key))
        if doc is not None:
            node.batch = doc.name
            progress.pending(node, doc.name)
            handled.add(id(node))
        elif id(node) in by_legacy:  # the caller runs it one by one: it claims and records both keys
            _key_now_back(node, by_legacy.pop(id(node)))
    return handled


# What a node going by its legacy (or earlier) key had under its key now: key, document, its bytes, record, record id,
# unseen, and the legacy key it had (Node.legacy; None when it goes by its earlier key and had none).
_KeyNow = tuple[str, dict[str, Any], bytes | None, dict[str, Any] | None, str | None, list[str] | None,
                tuple[str, dict[str, Any], bytes] | None]


def _by_legacy_key(store: Store, node: Node, legacy: tuple[str, dict[str, Any], bytes] | None) -> _KeyNow:
    """The node keyed by `node.legacy` (its legacy key, or its earlier one) for this layer; `legacy`: the legacy key
    it is given back with (builder/legacy_keys.py records what it executes one by one under that one only)."""
    assert node.legacy is not None
    kept: _KeyNow = (node.key, node.document, node.document_bytes, node.record, node.record_id, node.unseen, legacy)
    node.take_legacy()
    node.keyed_now = kept[:3]
    # As planned under it: what is there now is not adopted as if stored meanwhile (an older claw's failure there is
    # asked again, as the node's own failure would be).
    node.record_id = store.get_action_record_id(node.key, look_again=False)
    return kept


def _key_now_back(node: Node, kept: _KeyNow) -> None:
    node.key, node.document, node.document_bytes, node.record, node.record_id, node.unseen, node.legacy = kept
    node.keyed_now = None


def _open(nodes: list[Node], handled: set[int]) -> list[Node]:
    return [n for n in nodes if id(n) not in handled]


def _submit(how: BatchKind, store: Store, batcher: Batcher, nodes: list[Node],
            recorded: Callable[[Node, Adopted], None], result: Pass, budget: Budget | None) -> list[Node]:
    """Submit the nodes no batch covers (with --max-cost, while their estimates fit); returns those
    another build holds (try again shortly)."""
    covered = batch_doc.covered_keys(batch_doc.pending(store))
    items = []
    for node in nodes:
        if oid_hex(node.key) in covered:
            continue
        adopted = stored_meanwhile(store, node)
        if adopted is not None:
            recorded(node, adopted)
            continue
        made = how.request(node)
        if made is None:
            continue
        endpoint, body, pricing = made
        node.batch_body = body  # (kept: a line this process collects is not made again)
        estimate = line_estimate(body, pricing)
        if budget is not None:
            if not budget.room_for(estimate):
                result.over_budget.add(node.key)
                continue
            budget.committed[node.key] = float(estimate or 0.0)  # counted now, settled when collected
        items.append(Batchable(node, endpoint, body, estimate))
    busy = batcher.submit(items, result)
    if budget is not None:
        sent = {key for doc in result.submitted for key in doc.keys}
        for item in items:  # not sent after all (another build holds it, or it was stored meanwhile)
            if oid_hex(item.node.key) not in sent:
                budget.committed.pop(item.node.key, None)
    return [item.node for item in items if item.node.key in busy]


def _over_budget(nodes: list[Node], result: Pass, budget: Budget | None) -> list[Node]:
    """The nodes --max-cost kept from being submitted (the build says why)."""
    if budget is None or not result.over_budget:
        return []
    budget.note_skips("submitted")  # (its own sum said 0.000000 USD 'reached' where a cost spent was unknown)
    return [n for n in nodes if n.key in result.over_budget]
