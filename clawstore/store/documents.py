"""The store's documents as typed models (record and metrics, build log, kept-apart set, campaign head): each writes the
JSON it always wrote and each reader names, in one line, the field a hostile file gets wrong. Details: docs/store.md
(Details by module)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError, one_line, quoted
from clawstore.values.bounds import (
    MAX_LATENCY_S,
    MAX_RECORD_COST_USD,
    MAX_RECORD_TOKENS,
    amount_problem,
    count_problem,
    source_problem,
)
from clawstore.values.canonical import field_values
from clawstore.values.costs import SOURCES, CostSum

if TYPE_CHECKING:
    from clawstore.store.services.archive_listing import ObjectListing

# ------------------------------------------------------------------------------------------ reading


def damaged(where: str, name: str, expected: str) -> StoreError:
    """The one-line error of a reader: where the document is, its field, what the field should be."""
    return StoreError(one_line(f"{where}: {name}: expected {expected}"))


def _field(data: Mapping[str, Any], name: str, types: frozenset[type], expected: str, where: str,
           default: Any = None) -> Any:
    """`data[name]` if its type is one of `types` exactly (a bool is no count, a str subclass no id); a
    missing field: `default`; else the reader's error."""
    value = data.get(name, _ABSENT)
    if value is _ABSENT:
        return default
    if type(value) not in types:
        raise damaged(where, name, expected)
    return value


_ABSENT: Any = object()
_STR, _DICT, _BOOL, _LIST, _NONE = frozenset({str}), frozenset({dict}), frozenset({bool}), frozenset({list}), \
    frozenset({type(None)})


def _object(data: Any, where: str, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise StoreError(one_line(f"{where}: not {what} (a JSON object), but {quoted(type(data).__name__)}"))
    return data


# ------------------------------------------------------------------------------------------ metrics


def _metric(doc: str, build_doc: str) -> Any:
    """A token count's field: `doc` is its column's meaning per node, `build_doc` per build (query/schema.py)."""
    return field(default=None, metadata={"doc": doc, "build_doc": build_doc})


@dataclass(frozen=True, slots=True)
class Metrics:
    """A record's `metrics`: what a node's provider calls cost. A count or a cost is None when unknown
    (never 0); `cost_source` is absent from records written before it was kept (values/costs.py source_of)."""

    input_tokens: int | None = _metric("prompt tokens", "input tokens spent by this build (NULL: a part is unknown, or "
                                       "the build was killed)")
    output_tokens: int | None = _metric("completion tokens",
                                        "output tokens spent by this build (NULL: a part is unknown, or the "
                                        "build was killed)")
    reasoning_tokens: int | None = _metric("reasoning tokens (subset of output)",
                                           "reasoning tokens spent by this build")
    cached_tokens: int | None = _metric("cached prompt tokens", "cached prompt tokens of this build")
    cost_usd: float | None = None
    latency_s: float | None = None
    cost_source: str | None = None
    # What a node whose cost is unknown spent at least (an OpenClaw run left unfinished: the requests its transcript
    # shows answered), absent otherwise: its cost's known part (values/costs.py CostSum), its tokens' (`≥`).
    cost_known_usd: float | None = None
    input_tokens_known: int | None = None
    output_tokens_known: int | None = None

    def to_json(self) -> dict[str, Any]:
        return metrics_json({name: getattr(self, name) for name in (*METRIC_FIELDS, "cost_source", *KNOWN_PART)})

    @classmethod
    def of(cls, metrics: Mapping[str, Any]) -> Metrics:
        """The metrics named in `metrics` (what a runner or a judge gathered; others are left out)."""
        return cls(**{name: metrics.get(name) for name in (*METRIC_FIELDS, "cost_source", *KNOWN_PART)})

    @classmethod
    def read(cls, data: Any, where: str) -> Metrics:
        """A stored record's metrics; StoreError naming the field a hostile record gets wrong."""
        problem = metrics_problem(data)
        if problem is not None:
            raise StoreError(one_line(f"{where}: {problem}"))
        return cls.of(data or {})


# The token counts every record and build log carries (and providers' usage sums), by their one name,
# with the meaning of their columns per node and per build.
TOKEN_DOCS: dict[str, tuple[str, str]] = {f.name: (f.metadata["doc"], f.metadata["build_doc"])
                                          for f in fields(Metrics) if "doc" in f.metadata}
TOKEN_METRICS: tuple[str, ...] = tuple(TOKEN_DOCS)
METRIC_FIELDS: tuple[str, ...] = (*TOKEN_METRICS, "cost_usd", "latency_s")
KNOWN_PART: tuple[str, ...] = ("cost_known_usd", "input_tokens_known", "output_tokens_known")  # only when present
KNOWN_TOKENS: tuple[str, ...] = ("input_tokens", "output_tokens")  # the counts a known part (`<name>_known`) has

_METRIC_RULES: dict[str, Callable[[Any], str | None]] = {
    **{name: lambda v: None if v is None else count_problem(v, MAX_RECORD_TOKENS) for name in TOKEN_METRICS},
    "cost_usd": lambda v: amount_problem(v, MAX_RECORD_COST_USD),
    "latency_s": lambda v: amount_problem(v, MAX_LATENCY_S),
    "cost_source": source_problem,
    "cost_known_usd": lambda v: amount_problem(v, MAX_RECORD_COST_USD),
    **{name: lambda v: None if v is None else count_problem(v, MAX_RECORD_TOKENS)
       for name in ("input_tokens_known", "output_tokens_known")},
}


def metrics_problem(metrics: Any) -> str | None:
    """Why a record's `metrics` cannot be stored or indexed ('metrics.<field>: ...'), or None: a number
    the manifest could not hold is never written, nor indexed (values/bounds.py)."""
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        return "metrics: expected a mapping"
    if _plainly_bounded(metrics):  # (every record a node writes: the rules' answer without a call a field)
        return None
    for name, rule in _METRIC_RULES.items():
        problem = rule(metrics.get(name))
        if problem:
            return f"metrics.{name}: {problem}"
    return None


def _plainly_bounded(metrics: dict[str, Any]) -> bool:
    """True only where every rule of `_METRIC_RULES` finds nothing: counts plain ints in bounds, amounts ints or floats
    in bounds (so finite), the source absent or known; anything else (a float count, a bool, a stranger) is left to
    the rules, which name the problem or accept it."""
    for name in _COUNTS:
        value = metrics.get(name)
        if value is not None and not (type(value) is int and 0 <= value <= MAX_RECORD_TOKENS):
            return False
    for name, high in _AMOUNTS:
        value = metrics.get(name)
        if value is not None and not (type(value) in _NUMBER and 0 <= value <= high):
            return False
    source = metrics.get("cost_source")
    return source is None or (type(source) is str and source in SOURCES)


_AMOUNTS = (("cost_usd", MAX_RECORD_COST_USD), ("latency_s", MAX_LATENCY_S), ("cost_known_usd", MAX_RECORD_COST_USD))
_NUMBER = frozenset({int, float})
_COUNTS = (*TOKEN_METRICS, "input_tokens_known", "output_tokens_known")


def metrics_json(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """`Metrics.of(metrics).to_json()` made without the object (a record a node)."""
    values = {name: metrics.get(name) for name in METRIC_FIELDS}
    source = metrics.get("cost_source")
    if source is not None:
        values["cost_source"] = source
    for name in KNOWN_PART:  # (absent from every record but one whose cost is unknown and partly known)
        if metrics.get(name) is not None:
            values[name] = metrics[name]
    return values


# ------------------------------------------------------------------------------------------ records

# 2: names its input document (`input`, the id its key is) so an entry can be verified from the store
# alone (store/actions.py entry_problem); 1 kept that id only among the outputs. Both are read.
RECORD_VERSION = 2


@dataclass(frozen=True)
class RecordDoc:
    """What the action cache maps a node's key to: one canonical JSON object (version 2; version 1, without `input`, is
    still read). Its layout: docs/store.md (Details by module)."""

    kind: str
    key: str
    address: dict[str, Any]
    status: str
    cacheable: bool
    outputs: dict[str, Any]
    metrics: Metrics
    summary: dict[str, Any]
    error: dict[str, Any] | None
    started_at: str
    finished_at: str
    build_id: str
    record_version: int = RECORD_VERSION

    def to_json(self) -> dict[str, Any]:
        return {**field_values(self), "metrics": self.metrics.to_json(), "input": self.key}

    @classmethod
    def from_json(cls, doc: Any, where: str = "record") -> RecordDoc:
        """A stored record (version 1 or 2); StoreError (a ValueError's kin for callers that catch
        ClawError) naming the field that does not fit."""
        return read_record(doc, where)


def record_json(*, kind: str, key: str, address: dict[str, Any], status: str, cacheable: bool,
                outputs: dict[str, Any], metrics: dict[str, Any], summary: dict[str, Any], error: dict[str, Any] | None,
                started_at: str, finished_at: str, build_id: str) -> dict[str, Any]:
    """`RecordDoc(...).to_json()` made in one pass, `metrics` already as `metrics_json` gives them: the same keys in
    the same order, the values shared (a record a node: no dataclass made to be taken apart at once)."""
    return {"kind": kind, "key": key, "address": address, "status": status, "cacheable": cacheable,
            "outputs": outputs, "metrics": metrics, "summary": summary, "error": error, "started_at": started_at,
            "finished_at": finished_at, "build_id": build_id, "record_version": RECORD_VERSION, "input": key}


_RECORD_TYPES: dict[str, tuple[frozenset[type], str]] = {
    "kind": (_STR, "a string"), "key": (_STR, "an object id"), "address": (_DICT, "an object"),
    "status": (_STR, "a string"), "cacheable": (_BOOL, "true or false"), "outputs": (_DICT, "an object"),
    "summary": (_DICT, "an object"), "error": (_DICT | _NONE, "an object or null"),
    "started_at": (_STR, "a time (string)"), "finished_at": (_STR, "a time (string)"),
    "build_id": (_STR, "a string"),
}


def read_record(data: Any, where: str) -> RecordDoc:
    """A record (version 1 or 2) from its JSON; StoreError naming the field a hostile one gets wrong."""
    doc = _object(data, where, "a record")
    version = doc.get("record_version", 1)
    if type(version) is not int or version not in (1, RECORD_VERSION):
        raise damaged(where, "record_version", f"1 or {RECORD_VERSION}, not {quoted(version)}")
    values: dict[str, Any] = {}
    for name, (types, expected) in _RECORD_TYPES.items():
        values[name] = value = _field(doc, name, types, expected, where, _ABSENT)
        if value is _ABSENT:
            raise damaged(where, name, f"{expected} (the record has none)")
    if "metrics" not in doc:
        raise damaged(where, "metrics", "an object (the record has none)")
    return RecordDoc(**values, metrics=Metrics.read(doc["metrics"], where), record_version=version)


# ---------------------------------------------------------------------------------------- build logs

BUILD_LOG_FORMAT = 2
JOURNALED_FORMAT = 3  # a running (or killed) build's log: its nodes in the journal beside it (store/buildlogs.py)
COUNTERS = {"exec": "executed", "reuse": "reused", "fail": "failed", "skip": "skipped"}


def _build_metrics() -> dict[str, Any]:
    return {**{name: 0 for name in TOKEN_METRICS}, **CostSum().build_metrics()}


@dataclass
class BuildLogDoc:
    """A build log document (layout: store/buildlogs.py). Mutable: a build fills it in as it runs."""

    build_id: str
    started_at: str
    campaign: dict[str, Any]
    finished_at: str | None = None
    state: str | None = "running"  # (None: a format-1 log that did not say)
    filter: dict[str, list[str]] | None = None
    head: str | None = None
    head_written: bool = False
    nodes: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {name: 0 for name in COUNTERS.values()})
    metrics: dict[str, Any] = field(default_factory=_build_metrics)
    format: int = BUILD_LOG_FORMAT
    # State `stopped`: what stopped it and how many nodes it kept from starting (`{"by": "max_cost",
    # "nodes_not_started": 2}`: STOPPED_BY), carried into the head it wrote (`claw report`, `claw view`); else None.
    stopped: dict[str, Any] | None = None
    # What the whole campaign expects, its --case/--model filter or not: `{"cases": N, "models": [model ids]}` (N cases
    # each, so N × models results), carried into the head it wrote: `claw report` and `claw view` say how many of them
    # the head holds (read_expected). None: a log written before session 80, or not by a build (those leave it out).
    expected: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        # Shallow: the nodes are plain dicts already, and asdict's deep copy of thousands of them on
        # every periodic write of a running build's log cost seconds of CPU per campaign.
        values = field_values(self)
        for name in ("stopped", "expected"):  # (absent when None: those logs and heads as before sessions 78 and 80)
            if values[name] is None:
                del values[name]
        return values

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    @property
    def campaign_id(self) -> str | None:
        value = self.campaign.get("id")
        return None if value is None else str(value)


_LOG_TYPES: dict[str, tuple[frozenset[type], str]] = {
    "build_id": (_STR, "a string"),
    "campaign": (_DICT, "an object"),
    "head": (_STR | _NONE, "an object id or null"),
    "started_at": (_STR, "a time (string)"),
    "finished_at": (_STR | _NONE, "a time (string) or null"),
    "state": (_STR, "a string"),
    "filter": (_DICT | _NONE, "an object or null"),
    "head_written": (_BOOL, "true or false"),
    "counts": (_DICT, "an object"),
    "metrics": (_DICT, "an object"),
    "stopped": (_DICT | _NONE, "an object or null"),
    "expected": (_DICT | _NONE, "an object or null"),
}


def read_build_log_doc(data: Any, where: str) -> BuildLogDoc:
    """A build log (format 1, 2 or 3: then its nodes are in its journal) from its JSON; StoreError naming the field
    a hostile one gets wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise StoreError(f"{where}: not a build log (a JSON object with a nodes list)")
    version = data.get("format", 1)
    if version not in (1, BUILD_LOG_FORMAT, JOURNALED_FORMAT) or isinstance(version, bool):
        raise StoreError(f"{where}: unsupported build log format {quoted(version)} (this claw reads 1, 2 and 3)")
    values = {name: _field(data, name, types, expected, where, _ABSENT)
              for name, (types, expected) in _LOG_TYPES.items()}
    if values["build_id"] is _ABSENT:
        raise damaged(where, "build_id", "a string")
    given = {name: value for name, value in values.items() if value is not _ABSENT}
    # What a format-1 log lacks reads as nothing (no state, no counts), never as a default's zeros.
    lacking = {"campaign": {}, "started_at": "", "state": None, "counts": {}, "metrics": {}}
    return BuildLogDoc(**{**lacking, **given}, nodes=data["nodes"], format=version)



# --------------------------------------------------------------------------------------- kept apart

KEPT_APART_KIND = "untrusted-import"


@dataclass(frozen=True, slots=True)
class KeptApart:
    """Entries and refs received from a signer the user does not trust (yet): store/untrusted.py.
    `signers`: every signer of a pull's packs (then no `digest`); `digest`: the archive's, or the pack's."""

    signer: str | None
    actions: dict[str, str]
    refs: dict[str, str]
    signers: list[str | None] | None = None
    digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": KEPT_APART_KIND, "signer": self.signer, "actions": self.actions,
                               "refs": self.refs}
        if self.signers is not None:
            doc["signers"] = self.signers
        if self.digest is not None:
            doc["digest"] = self.digest
        return doc

    @property
    def every_signer(self) -> list[str | None]:
        """Who must be trusted before it moves in: every signer of a pull's packs, else the one."""
        return list(self.signers) if self.signers else [self.signer]

    def signer_text(self) -> str:
        """Who signed it, for views and reports ("unsigned" when nobody did)."""
        return ", ".join(sorted({str(s) if s else "unsigned" for s in self.every_signer}))


def read_kept_apart(data: Any, where: str) -> KeptApart | None:
    """A kept-apart set from its JSON; None for JSON of another kind (not one of these); StoreError
    naming the field a damaged one gets wrong."""
    if not isinstance(data, dict) or data.get("kind") != KEPT_APART_KIND:
        return None
    signer = _field(data, "signer", _STR | _NONE, "a key or null", where)
    signers = _field(data, "signers", _LIST | _NONE, "a list of keys", where)
    if signers is not None and not all(s is None or isinstance(s, str) for s in signers):
        raise damaged(where, "signers", "a list of keys")
    maps = {name: _field(data, name, _DICT, "an object of ids", where, {}) for name in ("actions", "refs")}
    for name, found in maps.items():
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
            raise damaged(where, name, "an object of ids")
    digest = _field(data, "digest", _STR | _NONE, "an object id", where)
    return KeptApart(signer, maps["actions"], maps["refs"], signers, digest)


# ----------------------------------------------------------------------------------- campaign heads


@dataclass(frozen=True, slots=True)
class HeadNode:
    """A node of a campaign head (store/headdoc.py): its record, what the build that wrote the head did
    with it, a planning view of the record (`record_doc`), and why fsck --repair took the record away."""

    kind: str
    key: str
    address: dict[str, Any]
    record: str | None = None
    action: str | None = None
    record_doc: dict[str, Any] | None = None
    quarantined: str | None = None
    stored: dict[str, Any] | None = field(default=None, compare=False, repr=False)  # as read

    def record_view(self) -> dict[str, Any] | None:
        """`record_doc` (as store/headdoc.py LazyHeadNode's, which decodes it when asked)."""
        return self.record_doc

    def as_doc(self) -> dict[str, Any]:
        """The node as a head stores it: as read, when it was (a head merging it carries the same bytes)."""
        if self.stored is not None:
            return self.stored
        return {name: getattr(self, name) for name in _NODE_TYPES
                if name in _NODE_REQUIRED or getattr(self, name) is not None}


_NODE_TYPES: dict[str, tuple[frozenset[type], str]] = {
    "kind": (_STR, "a string"), "key": (_STR, "an object id"), "address": (_DICT, "an object"),
    "record": (_STR | _NONE, "an object id or null"), "action": (_STR | _NONE, "a string or null"),
    "record_doc": (_DICT | _NONE, "an object or null"), "quarantined": (_STR | _NONE, "a string or null"),
}
_NODE_REQUIRED = ("kind", "key", "address")


@dataclass(frozen=True)
class Head:
    """A campaign head with its nodes inline (whatever version wrote it): the fields of the build log
    that wrote it (its campaign) and every node the campaign plans."""

    campaign: dict[str, Any]
    nodes: tuple[HeadNode, ...]
    head_version: int = 1
    build_id: str | None = None
    state: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    stopped: dict[str, Any] | None = None  # a stop kept nodes of its build from starting (BuildLogDoc.stopped)
    expected: dict[str, Any] | None = None  # what the campaign expects (BuildLogDoc.expected; None: not said)

    @property
    def campaign_id(self) -> str | None:
        value = self.campaign.get("id")
        return None if value is None else str(value)


def read_head(data: Any, where: str) -> Head:
    """A campaign head (nodes inline: headdoc.read_head_doc); StoreError naming the field a hostile one
    gets wrong (`nodes[3].address: expected an object`)."""
    if not isinstance(data, dict) or type(data.get("nodes")) is not list:
        raise StoreError(f"{where}: not a campaign head (a JSON object with a nodes list)")
    campaign = _field(data, "campaign", _DICT, "an object", where, {})
    version = _field(data, "head_version", frozenset({int}), "a version number", where, 1)
    nodes = [read_head_node(node, where, at) for at, node in enumerate(data["nodes"])]
    found = {name: _field(data, name, _STR | _NONE, "a string or null", where) for name in _HEAD_TEXTS}
    return Head(campaign, tuple(nodes), version, **found, stopped=read_stopped(data, where),
                expected=read_expected(data, where))


# What stops a build before its end, each keeping nodes from starting: its run profile's execution_policy (runs only),
# `claw build --max-cost` (its limit reached or its spend unknown), an endpoint's final HTTP 402 (out of credit)
STOPPED_BY = frozenset({"stop_on_runner_error", "fail_fast", "max_cost", "out_of_credit"})


def read_stopped(data: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """A build log's or head's `stopped`, as `{"by": …, "nodes_not_started": N}` (None: absent, as every log before
    session 78 has it); StoreError naming the field a hostile one gets wrong (it is shown: no other key, a known stop,
    a count)."""
    stopped = _field(data, "stopped", _DICT | _NONE, "an object or null", where)
    if stopped is None:
        return None
    by = stopped.get("by") if isinstance(stopped.get("by"), str) else None  # (a list is no name, nor hashable)
    if set(stopped) != {"by", "nodes_not_started"} or by not in STOPPED_BY:
        raise damaged(where, "stopped", f"by (one of {', '.join(sorted(STOPPED_BY))}) and nodes_not_started")
    if type(stopped["nodes_not_started"]) is not int or stopped["nodes_not_started"] < 0:
        raise damaged(where, "stopped.nodes_not_started", "a count")
    return {"by": by, "nodes_not_started": stopped["nodes_not_started"]}


def read_expected(data: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """A build log's or head's `expected`, as `{"cases": N, "models": [model ids]}` (None: absent, as every log before
    session 80 has it); StoreError naming the field a hostile one gets wrong (shown: no other key, a count, ids)."""
    expected = _field(data, "expected", _DICT | _NONE, "an object or null", where)
    if expected is None:
        return None
    if set(expected) != {"cases", "models"}:
        raise damaged(where, "expected", "cases and models")
    if type(expected["cases"]) is not int or expected["cases"] < 0:
        raise damaged(where, "expected.cases", "a count")
    models = expected["models"]
    if type(models) is not list or not all(type(m) is str for m in models) or len(set(models)) != len(models):
        raise damaged(where, "expected.models", "a list of model ids")
    return {"cases": expected["cases"], "models": list(models)}


def stopped_text(stopped: Mapping[str, Any]) -> str:
    """A `stopped` (read_stopped) as `claw report`, `claw view` and `claw status` say it."""
    by = stopped["by"]  # (--max-cost: its limit reached, or a cost spent unknown; the build's line said which)
    named = ("--max-cost" if by == "max_cost"
             else "an endpoint out of credit (HTTP 402)" if by == "out_of_credit"
             else f"the run profile's execution_policy ({by})")
    return f"stopped by {named}: {stopped['nodes_not_started']} node(s) not started"


def read_head_node(node: Any, where: str, at: int) -> HeadNode:
    """The node `nodes[at]` of a campaign head, typed (StoreError naming the field a hostile one gets wrong)."""
    if type(node) is not dict:
        raise damaged(where, f"nodes[{at}]", "an object")
    # A node as builds write it, typed in one expression (a stale campaign's `claw status` types its 200,000 head
    # nodes at 10,000 × 5); anything else (a field missing or of another type) is said field by field below.
    get = node.get
    kind, key, address, record, action, record_doc, quarantined = (
        get("kind"), get("key"), get("address"), get("record"), get("action"), get("record_doc"), get("quarantined"))
    if (type(kind) is str and type(key) is str and type(address) is dict and (record is None or type(record) is str)
            and (action is None or type(action) is str) and (record_doc is None or type(record_doc) is dict)
            and (quarantined is None or type(quarantined) is str)):
        return HeadNode(kind, key, address, record, action, record_doc, quarantined, node)
    values = {}
    for name, (types, expected) in _NODE_TYPES.items():
        value = node.get(name, _ABSENT)
        if value is _ABSENT and name in _NODE_REQUIRED:
            raise damaged(where, f"nodes[{at}].{name}", f"{expected} (the node has none)")
        if value is not _ABSENT:
            if type(value) not in types:
                raise damaged(where, f"nodes[{at}].{name}", expected)
            values[name] = value
    return HeadNode(**values, stored=node)


_HEAD_TEXTS = ("build_id", "state", "started_at", "finished_at")  # the fields of the build log that wrote it


# ---------------------------------------------------------------------------------- archive manifests

ARCHIVE_FORMAT = "clawstore-archive"
ARCHIVE_VERSION = 1


@dataclass(frozen=True)
class SignatureCheck:
    """What checking an archive manifest's signature over its bytes found: the key that signed it (None: unsigned),
    or why it does not verify (trust/signature.py signer_of)."""

    signer: str | None
    problem: str | None = None


@dataclass(frozen=True)
class ArchiveManifest:
    """An archive's manifest (layout and checks: store/services/archive.py read_archive_manifest): the
    objects it holds (sorted digests and their stored sizes, packed: a sequence of (hex, size)), its entries (key id
    -> record id, packed, in key order) and refs, the fields a campaign archive adds (head, build_id, campaign,
    configs), and `signed`: the document's other fields as read (its signature among them); `document()` is the whole
    document, which the signature covers (trust/signature.py). `signature`: what checking it over the manifest's bytes
    found, when the reader was asked to (None: not checked)."""

    objects: ObjectListing
    refs: dict[str, str]
    actions: Mapping[str, str]
    signed: dict[str, Any]
    head: str | None = None
    build_id: str | None = None
    campaign: dict[str, Any] = field(default_factory=dict)
    configs: dict[str, Any] | None = None
    version: int = ARCHIVE_VERSION
    signature: SignatureCheck | None = None

    def document(self) -> dict[str, Any]:
        """The whole manifest as JSON values (for `claw archive ls --json`: every object and entry, as lists)."""
        return {**self.signed, "objects": self.objects.to_json(), "actions": dict(self.actions.items())}

    @property
    def campaign_id(self) -> str | None:
        value = self.campaign.get("id")
        return None if value is None else str(value)

    @property
    def configs_tree(self) -> str | None:
        """The id of the campaign's config tree, when the archive carries it."""
        tree = (self.configs or {}).get("tree")
        return tree if isinstance(tree, str) else None


# --------------------------------------------------------------------------------------- no-op stamps

STAMP_FORMAT = 3  # 3: the cases and their nodes (2: without; 1: rows inside): an older one does not match


@dataclass(frozen=True)
class Stamp:
    """What a build that left its campaign complete saw (builder/stamp.py): the files it read, the
    environment, code and store it ran with, and what it printed. Fields in the order written."""

    campaign: dict[str, Any]
    campaign_id: str
    head: str
    reads: dict[str, Any]  # path -> [size, mtime, ctime, inode] (None: absent)
    env: str
    code: str
    store: list[Any]
    rows: dict[str, Any]  # the rows file beside it: {"bytes": its size, "blake3": its digest}
    counts: dict[str, int]
    layers: Any  # [(model id, {layer: nodes})]: builder/stamp.py layers_of checks it
    cases: Any = None  # {"files": [[case id, test.yaml]] in campaign order, "layers": a case's}: builder/casestamp.py
    format: int = STAMP_FORMAT

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, **{name: value for name, value in field_values(self).items()
                                          if name != "format"}}


def read_stamp(data: Any, where: str) -> Stamp:
    """A stamp from its JSON; StoreError naming the field a damaged or hand-edited one gets wrong."""
    doc = _object(data, where, "a stamp")
    if doc.get("format") != STAMP_FORMAT:
        raise damaged(where, "format", f"{STAMP_FORMAT}")
    types = {"campaign": (_DICT, "an object"), "campaign_id": (_STR, "a string"), "head": (_STR, "an object id"),
             "reads": (_DICT, "an object"), "env": (_STR, "a digest"), "code": (_STR, "a digest"),
             "store": (_LIST, "a list"), "rows": (_DICT, "an object"), "counts": (_DICT, "an object")}
    values = {}
    for name, (kinds, expected) in types.items():
        values[name] = _field(doc, name, kinds, expected, where, _ABSENT)
        if values[name] is _ABSENT:
            raise damaged(where, name, f"{expected} (the stamp has none)")
    rows = values["rows"]
    if not (type(rows.get("bytes")) is int and type(rows.get("blake3")) is str):
        raise damaged(where, "rows", "the rows file's bytes and blake3")
    return Stamp(**values, layers=doc.get("layers"), cases=doc.get("cases"))
