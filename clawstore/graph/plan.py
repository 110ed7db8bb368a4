"""Expand a resolved campaign into run nodes with their keys, and look up what is already built."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawstore.graph.keys import attachments_document, harness_settings, keyed_document, run_document, unsent_input
from clawstore.graph.records import is_fresh

if TYPE_CHECKING:
    from clawstore.config.campaign import Campaign, CampaignItem
    from clawstore.config.models import JudgeConfig, JudgeRunConfig
    from clawstore.providers.endpoint import Endpoint
    from clawstore.store.documents import HeadNode
    from clawstore.store.face import ObjectReader, ObjectWriter, StoreReader


ItemIdentity = Callable[["CampaignItem"], "dict[str, Any] | None"]  # a callback of plan_runs
HeadNodes = dict[str, "HeadNode"]  # a campaign head's nodes by address id (address_id)


@dataclass(eq=False, slots=True)
class Node:
    """One unit of work: its logical address, input document, key and (once known) record.

    Compared by identity (eq=False): `node in nodes` stays cheap. Slotted: a build holds one per node of
    the campaign (why both: docs/building.md, Details by module, graph/plan.py)."""

    kind: str
    address: dict[str, Any]
    document: dict[str, Any]
    key: str
    item: CampaignItem | None = None  # the model × case it belongs to (None: a status placeholder)
    record: dict[str, Any] | None = None
    record_id: str | None = None
    action: str | None = None  # exec | reuse | fail | skip
    # What it learns after it is made: what it was planned with beyond its document, and what became of it
    # (each set only where it applies). Planning (builder/api.py, builder/eval_layer.py, attach_record):
    endpoint: Endpoint | None = None  # a run's provider
    run: Node | None = None  # an evaluation node's run
    judge: JudgeConfig | None = None  # a judgement's judge and judge run
    judge_run: JudgeRunConfig | None = None
    subdocuments: dict[str, dict[str, Any]] | None = None  # what `explain` expands the document by
    judge_requests: list[str] | None = None  # a result's judgements' request objects
    unseen: list[str] | None = None  # what its cached record names that the store no longer holds
    # Building.
    error: str | None = None  # why it failed, when it has no record saying so
    kept_result: str | None = None  # the earlier record a failed re-execution left in place
    claim_waits: int = 0  # how often another build's claim set it aside (builder/claimed.py)
    batch: str | None = None  # the provider batch it is pending in (builder/batch_layer.py)
    batch_body: dict[str, Any] | None = None  # its batch line's chat body, made once
    batch_summary: dict[str, Any] | None = None  # the batch its answer came by, for the record
    # Canonical bytes of objects it put that the nodes after it read next (oid → bytes): they take them from memory
    # instead of the store (builder/eval_layer.py; a run's artifact dropped once its last judgement here has its
    # request, builder/run_exec.py; the others when its window concludes).
    made: dict[str, bytes] | None = None
    # The canonical bytes its key is the id of (graph/keys.py `keyed_document`), stored as its input document when
    # it is recorded instead of encoding the document again (`put_input`); dropped with the document.
    document_bytes: bytes | None = None
    # (key, document, its bytes) the node had before a key formula dropped a price from it (docs/building.md, Keys):
    # a record under that key is reused, and the node keeps that key, so a store built before is not paid twice. Kept
    # on a node found under neither: a batch an older claw submitted may stand for it (builder/batch_layer.py).
    legacy: tuple[str, dict[str, Any], bytes] | None = None
    # (key, document, its bytes) of the node's key now, when its record was found under `legacy`: the build that reuses
    # it records it under this key as well (builder/legacy_keys.py), so that a later price edit (which changes the
    # legacy key) still finds it.
    keyed_now: tuple[str, dict[str, Any], bytes | None] | None = None
    # The (key, document, its bytes) the node had before what changes nothing it sends left its key (graph/keys.py),
    # newest first: an llm_probe run's before its turns left it (session 75) and before `timeout_seconds` and `retries`
    # did (session 74, its turns in it too); an OpenClaw run's before its container CLI as written left it, its
    # engine's name in its place (session 77: beside its `legacy`, if any, which has the CLI as written too); a
    # judgement's before its judge's `timeout_seconds`, `retries` and
    # `api_key_env`, and a rubric its prompt does not show, did (session 75; with the judge's `cost`, if any, left out
    # as since session 58: the judgement's key before 58 is its `legacy`), and before its judge's `type` and its
    # rubric's whitespace the prompt does not show did (session 76: every judgement has this one). Made when asked:
    # looked up for a record to reuse only, when none is under its key nor its legacy key (the first found is taken as
    # `legacy` is: the build records it under its key now), and for a pending provider batch an older claw submitted
    # (builder/batch_layer.py); never claimed nor written under.
    earlier: Callable[[], list[tuple[str, dict[str, Any], bytes]]] | None = None

    @property
    def fresh(self) -> bool:
        return is_fresh(self.record)

    def release(self) -> None:
        """Drop what only executing the node reads, once its record is stored or reused: the build keeps every
        node to its end (head, rows), and its input document was most of what one held (docs/building.md,
        Memory: what a build holds). The record's `input_document` output keeps the document."""
        self.document = RELEASED
        self.document_bytes = None
        self.judge_requests = None
        self.batch_body = None
        self.legacy = self.keyed_now = self.earlier = None

    def take_legacy(self) -> None:
        """Key the node as it was before a price left its key (`legacy`), its record not yet looked up."""
        assert self.legacy is not None
        self.key, self.document, self.document_bytes = self.legacy
        self.legacy = self.record_id = self.record = self.unseen = None


RELEASED: dict[str, Any] = {}  # a released node's document (never written to)


def put_input(store: ObjectWriter, node: Node) -> str:
    """Store the node's input document (its id is the node's key): the bytes its key was computed from when the
    node kept them, else the document encoded."""
    if node.document_bytes is not None:
        return store.put_bytes(node.document_bytes)
    return store.put_json(node.document)


def address_id(kind: str, address: dict[str, Any]) -> str:
    """A stable string for a logical address, e.g. `run/gpt/case_a/0`."""
    parts = [kind, str(address.get("model_id")), str(address.get("case_id")), str(address.get("repetition"))]
    if "judge_run_id" in address:
        parts += [str(address["judge_run_id"]), str(address.get("judge_repetition"))]
    return "/".join(parts)


def run_address(item: CampaignItem, repetition: int) -> dict[str, Any]:
    return {"model_id": item.model.model_id, "case_id": item.case.case.case_id, "repetition": repetition}


def plan_runs(campaign: Campaign, repetitions: int, endpoint_of: ItemIdentity,
              runner_identity_of: ItemIdentity, items: Sequence[CampaignItem] | None = None,
              legacy_identity_of: ItemIdentity | None = None,
              earlier_identity_of: ItemIdentity | None = None) -> list[Node]:
    """Models (suite order) × cases (sorted) × repetitions (of `items`, default every item of the campaign). Pure
    apart from the callbacks: `endpoint_of(item) -> dict | None` and `runner_identity_of(item) -> dict | None`;
    `legacy_identity_of(item)`, asked after it: the runner identity its runs had before a price left it (Node.legacy),
    None when the same; `earlier_identity_of(item)`, likewise: the one they had before what changes nothing they run
    left it (an OpenClaw run's container CLI as written, before session 77), as `Node.earlier`. An llm_probe run
    setting `timeout_seconds` or `retries`, or with `turns`, gets the keys it had before they left it (sessions 74,
    75) as `Node.earlier`."""
    nodes: list[Node] = []
    attachment_docs: dict[str, dict[str, Any]] = {}
    for item in campaign.items if items is None else items:
        case_id = item.case.case.case_id
        if case_id not in attachment_docs:  # read and hash each case's attachments once
            attachment_docs[case_id] = attachments_document(item)
        endpoint = endpoint_of(item)
        identity = runner_identity_of(item)
        legacy = legacy_identity_of(item) if legacy_identity_of is not None else None
        earlier_identity = earlier_identity_of(item) if earlier_identity_of is not None else None
        every_setting, unsent = harness_settings(item), unsent_input(item)
        for repetition in range(repetitions):
            document = run_document(item, repetition, endpoint=endpoint, attachments=attachment_docs[case_id],
                                    runner_identity=identity)
            key, data = keyed_document(document)
            node = Node("run", run_address(item, repetition), document, key, item, document_bytes=data)
            if legacy is not None:
                before = run_document(item, repetition, endpoint=endpoint, attachments=attachment_docs[case_id],
                                      runner_identity=legacy)
                legacy_key, legacy_data = keyed_document(before)
                node.legacy = (legacy_key, before, legacy_data)
            if earlier_identity is not None:  # (beside a legacy key: a store built between the two has this one)
                node.earlier = _earlier_identity(item, repetition, endpoint, attachment_docs[case_id],
                                                 earlier_identity)
            elif every_setting or unsent:
                node.earlier = _earlier_run(item, repetition, endpoint, attachment_docs[case_id], every_setting,
                                            unsent)
            nodes.append(node)
    return nodes


def _earlier_run(item: CampaignItem, repetition: int, endpoint: dict[str, Any] | None,
                 attachments: dict[str, dict[str, Any]], every_setting: bool,
                 unsent: bool) -> Callable[[], list[tuple[str, dict[str, Any], bytes]]]:
    """The run's keys, documents and bytes before session 75 (its turns in it: `unsent`) and before session 74 (every
    runner setting in it, and its turns: `every_setting`), made when asked."""

    def earlier() -> list[tuple[str, dict[str, Any], bytes]]:
        made = []
        for before_74 in [False] * unsent + [True] * every_setting:
            document = run_document(item, repetition, endpoint=endpoint, attachments=attachments,
                                    every_setting=before_74, unsent=True)
            key, data = keyed_document(document)
            made.append((key, document, data))
        return made

    return earlier


def _earlier_identity(item: CampaignItem, repetition: int, endpoint: dict[str, Any] | None,
                      attachments: dict[str, dict[str, Any]],
                      identity: dict[str, Any]) -> Callable[[], list[tuple[str, dict[str, Any], bytes]]]:
    """The run's key, document and bytes with the runner identity it had before (`identity`), made when asked."""

    def earlier() -> list[tuple[str, dict[str, Any], bytes]]:
        document = run_document(item, repetition, endpoint=endpoint, attachments=attachments, runner_identity=identity)
        key, data = keyed_document(document)
        return [(key, document, data)]

    return earlier


WINDOW_RUNS = 2_000  # runs a build plans, executes and evaluates at a time (docs/building.md, How a build proceeds)


def window_items(campaign: Campaign, runs: int, repetitions: int) -> Iterator[list[CampaignItem]]:
    """The campaign's items a window of about `runs` runs at a time (at least one case): whole cases in their sorted
    order, every model of each (the head's part order: case, then model; store/headdoc.py), each window's items in
    the campaign's order (models, then cases). A window never splits a case, so its nodes fill head parts whole. Each
    window's items are made when it is asked for (config/campaign.py `CampaignItems`): a build holds a window's."""
    items = campaign.items
    if not items.models:
        return
    step = max(1, runs // (len(items.models) * max(1, repetitions)))
    for start in range(0, len(items.cases), step):
        yield items.window(start, start + step)


def attach_record(node: Node, store: StoreReader, head: HeadNodes | None = None,
                  present: set[str] | None = None, look_again: bool = True) -> None:
    """Fill the node's cached record (None when never built under this key or when what it names is gone): a fresh
    record in the campaign `head` first, else the action cache. The record and its outputs must still exist; `present`:
    ids already seen; `look_again`: a miss lists the index again (see IndexView.find_action). Details: docs/building.md
    (Details by module)."""
    _attach_by_key(node, store, head, present, look_again)
    legacy = node.legacy
    if legacy is not None and node.fresh:
        node.legacy = None
    elif legacy is not None:  # built before a price left its key: reused under the key it had
        now = node.key, node.document, node.document_bytes, node.record_id, node.record, node.unseen
        node.take_legacy()
        _attach_by_key(node, store, head, present, look_again)
        if not node.fresh:  # (nothing reusable there: the node executes under its key, unless a batch stands for it)
            node.key, node.document, node.document_bytes, node.record_id, node.record, node.unseen = now
            node.legacy = legacy
        else:
            node.keyed_now = now[0], now[1], now[2]
    earlier = node.earlier
    if earlier is not None and node.fresh:
        node.earlier = None
    elif earlier is not None:  # (keyed with what changes nothing it sends: before session 74 or 75)
        now = node.key, node.document, node.document_bytes, node.record_id, node.record, node.unseen
        for before in earlier():
            node.key, node.document, node.document_bytes = before
            node.record_id = node.record = node.unseen = None
            _attach_by_key(node, store, head, present, look_again)
            if node.fresh:  # reused under the key it had; the build records it under its key now (legacy_keys.py)
                node.keyed_now, node.earlier = (now[0], now[1], now[2]), None
                return
        # (kept: a provider batch an older claw submitted may stand for it, builder/batch_layer.py)
        node.key, node.document, node.document_bytes, node.record_id, node.record, node.unseen = now


def _attach_by_key(node: Node, store: StoreReader, head: HeadNodes | None, present: set[str] | None,
                   look_again: bool) -> None:
    entry = head.get(address_id(node.kind, node.address)) if head else None
    if entry is not None and entry.key == node.key and entry.record is not None and is_fresh(
            record_doc := entry.record_view()):
        missing = unseen_objects(store, entry.record, record_doc, present)
        if not missing:
            node.record_id, node.record = entry.record, record_doc
            return
        node.unseen = missing
    found = store.get_action_record_id(node.key, look_again)
    if found is None or not store.has(found):
        if found is not None:
            node.unseen = [f"record {found}"]
        return
    record = store.get_json(found)
    missing = unseen_objects(store, None, record, present)
    if missing:
        node.unseen = missing
        return
    node.record_id, node.record = found, record


def require_keys(nodes: list[Node], force: bool) -> None:
    """Ask each endpoint the nodes that will execute call for its API key: a missing one is a clear error
    (MissingApiKeyError naming the variable) before any request, and only when something will run."""
    seen: set[Endpoint] = set()
    for node in nodes:
        endpoint = node.endpoint
        if endpoint is None or (node.fresh and not force) or endpoint in seen:
            continue
        seen.add(endpoint)
        endpoint.api_key()


def unseen_objects(store: ObjectReader, record_id: str | None, record: dict[str, Any] | None,
                   present: set[str] | None = None) -> list[str]:
    """What a cached record names that the store no longer holds: the record itself and its outputs,
    as `name id` strings (empty when everything is there)."""
    named = [("record", record_id)] if record_id is not None else []
    outputs = (record or {}).get("outputs") or {}
    if isinstance(outputs, dict):
        named += [(f"output {name}", oid) for name, value in outputs.items()
                  for oid in (value if isinstance(value, list) else [value]) if isinstance(oid, str)]
    known = present if present is not None else set()
    asked = [oid for _, oid in named if oid not in known]
    gone = set(store.missing(asked)) if asked else set()
    known.update(oid for oid in asked if oid not in gone)
    return [f"{what} {oid}" for what, oid in named if oid in gone]


def attach_records(nodes: list[Node], store: StoreReader, head: HeadNodes | None = None) -> None:
    """attach_record for each node, the index listed again on the first node's miss only: a cold plan missed every
    key and listed the index once per node (a view still looks again every RECHECK_S, and a node another build
    records meanwhile is adopted when claimed: builder/claimed.py)."""
    present: set[str] = set()
    for index, node in enumerate(nodes):
        attach_record(node, store, head, present, look_again=index == 0)
