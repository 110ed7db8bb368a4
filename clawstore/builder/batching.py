"""`--batch`: send single-request nodes through the provider's Batch API and collect them after any restart, never
paying twice for a node. How submitting and collecting stay safe: docs/batch.md (Details by module)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawstore.builder import batch_doc
from clawstore.builder.batch_doc import BatchDoc
from clawstore.builder.claimed import Adopted, claimed, stored_meanwhile
from clawstore.builder.refused import Refusals, is_final_402
from clawstore.builder.scheduler import Later
from clawstore.graph.plan import Node
from clawstore.providers.batch_api import TERMINAL, BatchApi, LineAnswer, read_lines, request_line, split_files
from clawstore.providers.endpoint import Endpoint
from clawstore.providers.errors import ProviderError
from clawstore.runners.pricing import priced_cost
from clawstore.runners.pricing import pricing as declared_prices
from clawstore.store.claims import ClaimBoard
from clawstore.store.core.ids import oid_from_hex, oid_hex

if TYPE_CHECKING:
    from clawstore.store.store import Store

@dataclass(frozen=True)
class Batchable:
    """A node that is one chat request: where it goes and what it sends."""

    node: Node
    endpoint: Endpoint
    body: dict[str, Any]
    estimate_usd: float | None = None


Record = Callable[[Node, LineAnswer, BatchDoc], tuple[str, dict[str, Any]]]
Recorded = Callable[[Node, "tuple[str, dict[str, Any]] | Adopted"], None]


@dataclass
class Pass:
    """What one pass over the batches did (for the build's summary and `claw batch status`)."""

    recorded: int = 0
    adopted: int = 0
    released: set[str] = field(default_factory=set)  # node keys (hex) whose lines failed or expired
    submitted: list[BatchDoc] = field(default_factory=list)
    pending: dict[str, BatchDoc] = field(default_factory=dict)  # node key (hex) -> its batch
    lines: list[str] = field(default_factory=list)  # one per batch seen: id, status, progress
    over_budget: set[str] = field(default_factory=set)  # node keys --max-cost kept from being submitted


TOKENS_PER_CHAR = 0.25  # a line's input tokens before it is sent (the same rule as `claw plan`'s default)
DEFAULT_OUTPUT_TOKENS = 600  # its output tokens when the request sets no max_tokens (`claw plan`'s judge default)


def line_estimate(body: dict[str, Any], pricing: Any) -> float | None:
    """A batch line's cost before it is sent, by `pricing` and its batch factor (None: no price declared)."""
    import json

    chars = len(json.dumps(body.get("messages"), ensure_ascii=False))
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    output = float(limit) if isinstance(limit, int) and not isinstance(limit, bool) else DEFAULT_OUTPUT_TOKENS
    return priced_batch_cost(pricing, chars * TOKENS_PER_CHAR, output)


def batch_factor(pricing: Any) -> float | None:
    """The declared `pricing.batch` (what a batch costs of the one-by-one price); 1 when `pricing`
    gives none (no discount is assumed), None when it is malformed."""
    factor = pricing.get("batch", 1) if isinstance(pricing, dict) else 1
    return None if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 0 else float(factor)


def priced_batch_cost(pricing: Any, input_tokens: float, output_tokens: float) -> float | None:
    """USD for one batch line by the declared `pricing` (USD per 1M tokens, the one formula of
    runners/pricing.py) times its `batch` factor. None when no price is declared."""
    prices, factor = declared_prices({"pricing": pricing}), batch_factor(pricing)
    if prices is None or factor is None:
        return None
    return priced_cost(prices, input_tokens, output_tokens) * factor


class Batcher:
    """Batches of one kind of node (`judge`, `run`) for one campaign, on one store."""

    def __init__(self, store: Store, board: ClaimBoard | None, *, kind: str, campaign_id: str, build_id: str,
                 api: Callable[[Endpoint], BatchApi] = BatchApi, refusals: Refusals | None = None):
        self.store = store
        self.refusals = refusals  # endpoints out of credit: no batch is submitted to them (builder/refused.py)
        self.board = board
        self.kind = kind
        self.campaign_id = campaign_id
        self.build_id = build_id
        self._api_for = api
        self._apis: dict[tuple[str, str | None], BatchApi] = {}

    def close(self) -> None:
        for api in self._apis.values():
            api.close()

    def _api(self, base_url: str, api_key_env: str | None) -> BatchApi:
        if (base_url, api_key_env) not in self._apis:
            self._apis[(base_url, api_key_env)] = self._api_for(Endpoint(base_url, api_key_env))
        return self._apis[(base_url, api_key_env)]

    # ---- collecting -------------------------------------------------------------------------------
    def collect(self, nodes: list[Node], record: Record, recorded: Recorded, result: Pass) -> None:
        """Poll every batch covering one of `nodes`; record what finished."""
        by_key: dict[str, list[Node]] = {}
        for node in nodes:
            by_key.setdefault(oid_hex(node.key), []).append(node)
        for doc in batch_doc.pending(self.store):
            if doc.kind != self.kind or not (doc.covered & by_key.keys()):
                continue
            try:
                doc = self._poll(doc, result)
            except ProviderError as exc:  # unreachable for now: the batch stays, the next pass polls it
                result.lines.append(f"batch {doc.batch_id}: cannot poll it: {exc}")
                continue
            if doc is None or doc.status not in TERMINAL:
                continue
            self._collect_one(doc, by_key, record, recorded, result)

    def _poll(self, doc: BatchDoc, result: Pass) -> BatchDoc | None:
        api = self._api(doc.base_url, doc.api_key_env)
        if doc.batch_id is None:  # a process died between recording and creating it: did it create it?
            found = api.find(doc.input_file_id)
            if found is None:
                found = self._create_left(api, doc)
                if found is None:  # its endpoint refused it (out of credit): not made, it stands for nothing
                    batch_doc.mark(self.store, doc.name, status="failed", released=set(doc.keys))
                    return None
            doc = batch_doc.mark(self.store, doc.name, batch_id=str(found["id"]), status=str(found["status"]),
                                 expires_at=_number(found.get("expires_at")))
            if doc is None or doc.batch_id is None:
                return doc
        try:
            state = api.get(doc.batch_id)
        except ProviderError as exc:
            if exc.status_code != 404:
                raise
            state = {"status": "failed"}  # the provider does not know it (any more): its nodes are sent again
        status = str(state.get("status"))
        counts = state.get("request_counts") or {}
        result.lines.append(f"batch {doc.batch_id} ({doc.model}, {len(doc.keys)} request(s)): {status}, "
                            f"{counts.get('completed', 0)} completed, {counts.get('failed', 0)} failed")
        if status not in TERMINAL:
            return doc
        fields: dict[str, Any] = {"status": status}
        if doc.output_object is None and state.get("output_file_id"):
            fields["output_object"] = self._keep(api.content(str(state["output_file_id"])))
        if doc.error_object is None and state.get("error_file_id"):
            fields["error_object"] = self._keep(api.content(str(state["error_file_id"])))
        return batch_doc.mark(self.store, doc.name, **fields)

    def _create_left(self, api: BatchApi, doc: BatchDoc) -> dict[str, Any] | None:
        """Create a batch a process recorded but did not create; None where its endpoint is out of credit (refused
        earlier in this build, or now: a final 402 noted as a submission's is), so nothing more is asked there."""
        endpoint = Endpoint(doc.base_url, doc.api_key_env)
        if self.refusals is not None and self.refusals.refuses(endpoint):
            return None
        try:
            return api.create(doc.input_file_id, {"claw_batch": doc.name})
        except ProviderError as exc:
            if self.refusals is None or not is_final_402(exc):
                raise
            self.refusals.note(endpoint, exc)
            return None

    def _keep(self, data: bytes) -> str:
        """The downloaded file, durable in the store before any line of it is used (it is paid for)."""
        oid = self.store.put_bytes(data)
        self.store.flush_batch()
        return oid

    def _collect_one(self, doc: BatchDoc, by_key: dict[str, list[Node]], record: Record, recorded: Recorded,
                     result: Pass) -> None:
        api = self._api(doc.base_url, doc.api_key_env)
        answers: dict[str, LineAnswer] = {}
        for oid in (doc.error_object, doc.output_object):  # an answer wins over an error for the same id
            if oid is not None:
                answers.update({a.custom_id: a for a in read_lines(self.store.get_bytes(oid), api.chat_url,
                                                                    api.endpoint.api_key())})
        # Expired, cancelled, or failed on the provider's side: sent again. An answer for a node this
        # plan does not have stays (it is paid for) until a build that plans it records it.
        released = {key for key in doc.covered if key not in answers or answers[key].retry}
        done: set[str] = set()
        for key in sorted((doc.covered & by_key.keys()) - released):
            answer = answers[key]
            first, *same = by_key[key]
            outcome = self._record_claimed(first, lambda n, a=answer: record(n, a, doc))
            if isinstance(outcome, Later):
                continue  # another process is recording it
            done.add(key)
            result.adopted += isinstance(outcome, Adopted)
            result.recorded += not isinstance(outcome, Adopted)
            recorded(first, outcome)
            for node in same:  # another address with the same key: the same record
                recorded(node, Adopted(*_stored(outcome)))
        result.released |= released
        batch_doc.mark(self.store, doc.name, done=done, released=released)

    def _record_claimed(self, node: Node, work: Callable[[Node], tuple[str, dict[str, Any]]]
                        ) -> tuple[str, dict[str, Any]] | Adopted | Later:
        if self.board is None:
            adopted = stored_meanwhile(self.store, node)
            return adopted if adopted is not None else work(node)
        return claimed(work, self.store, self.board, node)

    # ---- submitting -------------------------------------------------------------------------------
    def submit(self, items: list[Batchable], result: Pass) -> set[str]:
        """Send every item no batch covers yet (and no other build is executing), grouped per
        endpoint and model, in files within the provider's limits. Returns the node keys another
        build holds the claim of (it is submitting or executing them: look again shortly). Nothing
        goes to an endpoint out of credit: its items are left to the caller, whose stop skips them."""
        covered = batch_doc.covered_keys(batch_doc.pending(self.store))
        busy: set[str] = set()
        taken = []
        for item in _unique(items):
            if oid_hex(item.node.key) in covered:
                continue
            claim = self._take(item.node)
            if claim is None:
                busy.add(item.node.key)
            elif claim:
                taken.append(item)
        covered = batch_doc.covered_keys(batch_doc.pending(self.store))  # recorded just before we claimed?
        chosen = []
        for item in taken:
            if oid_hex(item.node.key) in covered:
                self._release(item.node)
            else:
                chosen.append(item)
        groups: dict[tuple[str, str | None, str], list[Batchable]] = {}
        for item in chosen:  # (the key its requests carry: none for a server $OPENROUTER_BASE_URL names, unset)
            groups.setdefault((item.endpoint.base_url, item.endpoint.key_env_in_use(), str(item.body.get("model"))),
                              []).append(item)
        try:
            for (base_url, key_env, model), group in groups.items():
                if self.refusals is not None and self.refusals.refuses(group[0].endpoint):
                    continue  # (a 402 answered a request or a batch of this build there: nothing more goes there)
                try:
                    self._submit_group(base_url, key_env, model, group, result)
                except ProviderError as exc:
                    if self.refusals is None or not is_final_402(exc):
                        raise
                    self.refusals.note(group[0].endpoint, exc)
        finally:
            for item in chosen:
                self._release(item.node)
        return busy

    def _submit_group(self, base_url: str, key_env: str | None, model: str, group: list[Batchable],
                      result: Pass) -> None:
        api = self._api(base_url, key_env)
        lines = [request_line(oid_hex(item.node.key), item.body) for item in group]
        estimates = [item.estimate_usd for item in group]
        start = 0
        for chunk in split_files(lines):
            part = group[start:start + len(chunk)]
            part_estimates = estimates[start:start + len(chunk)]
            start += len(chunk)
            data = b"".join(chunk)
            submitted_at = time.time()
            doc = BatchDoc(name=_name(data, submitted_at), kind=self.kind, base_url=base_url, api_key_env=key_env,
                           model=model, campaign_id=self.campaign_id, build_id=self.build_id,
                           input_file_id=api.upload(data), keys=[oid_hex(i.node.key) for i in part],
                           submitted_at=submitted_at,
                           estimate_usd=None if None in part_estimates else sum(e or 0.0 for e in part_estimates))
            batch_doc.write_new(self.store, doc)  # recorded before the provider is asked to make it
            try:
                created = api.create(doc.input_file_id, {"claw_batch": doc.name})
            except ProviderError as exc:
                if is_final_402(exc):  # refused, so not made: the document stands for nothing (its ref goes)
                    batch_doc.mark(self.store, doc.name, status="failed", released=set(doc.keys))
                raise
            marked = batch_doc.mark(self.store, doc.name, batch_id=str(created["id"]),
                                    status=str(created.get("status")), expires_at=_number(created.get("expires_at")))
            result.submitted.append(marked or doc)

    def _take(self, node: Node) -> bool | None:
        """Claim a node to submit it: True, False (stored meanwhile), or None (another build holds it)."""
        if self.board is not None and not self.board.take(node.key):
            return None
        if stored_meanwhile(self.store, node) is not None:
            self._release(node)
            return False
        return True

    def _release(self, node: Node) -> None:
        if self.board is not None:
            self.board.release(node.key)

    def pending_for(self, nodes: list[Node], result: Pass) -> None:
        """Which of `nodes` a batch stands for now."""
        covered = batch_doc.covered_keys(batch_doc.pending(self.store))
        for node in nodes:
            doc = covered.get(oid_hex(node.key))
            if doc is not None and doc.kind == self.kind:
                result.pending[oid_hex(node.key)] = doc


def forget_recorded(store: Store) -> list[BatchDoc]:
    """The batches still pending, once those whose every line is recorded are let go: a pull brings
    back a batch's ref that this store let go (push never deletes a remote's ref), and its lines'
    records, which name it, came with it (`summary.batch`)."""
    left = []
    for doc in batch_doc.pending(store):
        if doc.batch_id is not None and all(recorded_by(store, key, doc.name) for key in doc.covered):
            batch_doc.mark(store, doc.name, done=doc.covered)
        else:
            left.append(doc)
    return left


def recorded_by(store: Store, key: str, name: str) -> bool:
    """Whether `key`'s record here is the line batch `name` answered (pulled with it, or collected here)."""
    record_id = store.get_action_record_id(oid_from_hex(key))
    if record_id is None or not store.has(record_id):
        return False
    batch = (store.get_json(record_id).get("summary") or {}).get("batch")
    return isinstance(batch, dict) and batch.get("name") == name


def cancel(store: Store, name: str, api: Callable[[Endpoint], BatchApi] = BatchApi) -> BatchDoc | None:
    """Cancel one batch at its provider and release its nodes (the next build runs them)."""
    doc = batch_doc.read(store, name)
    if doc is None:
        return None
    with api(Endpoint(doc.base_url, doc.api_key_env)) as client:
        made = doc.batch_id or (client.find(doc.input_file_id) or {}).get("id")  # made, not yet recorded?
        if made:
            client.cancel(str(made))
    return batch_doc.mark(store, name, status="cancelled", released=doc.covered)


def _unique(items: list[Batchable]) -> list[Batchable]:
    seen: set[str] = set()
    found = []
    for item in items:
        if item.node.key not in seen:
            seen.add(item.node.key)
            found.append(item)
    return found


def _stored(outcome: tuple[str, dict[str, Any]] | Adopted) -> tuple[str, dict[str, Any]]:
    return (outcome.record_id, outcome.record) if isinstance(outcome, Adopted) else outcome


def _name(data: bytes, submitted_at: float) -> str:
    from clawstore.graph.keys import object_id

    return oid_hex(object_id(data + repr(submitted_at).encode()))[:32]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
