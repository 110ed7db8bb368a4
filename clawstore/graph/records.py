"""Records: what the action cache maps a node key to (docs/design/contracts.md)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from typing import Any

from clawstore.bounds import metrics_problem
from clawstore.canonical import field_values
from clawstore.store.actions import reusable

# 2: names its input document (`input`, the id its key is) so an entry can be verified from the store
# alone (store/actions.py entry_problem); 1 kept that id only among the outputs. Both are read.
RECORD_VERSION = 2
# Outcomes caused by infrastructure, not by the model: recorded with their cost, never served from cache.
INFRASTRUCTURE_STATUSES = frozenset({"provider_error", "timed_out", "failed"})
METRIC_FIELDS = ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens", "cost_usd", "latency_s")


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class RecordDoc:
    """What the action cache maps a node's key to: one JSON object (canonical JSON; its id is the
    BLAKE3 of those bytes). Layout, version 2:

        {"record_version": 2,
         "kind": "run" | "checks" | "judge" | "result",
         "key": "blake3:<64 hex>",          the id of the node's canonical input document
         "input": "blake3:<64 hex>",        that document (always equal to key; names it for checks)
         "address": {"model_id", "case_id", "repetition", "judge_run_id", "judge_repetition", ...},
         "status": "success" | "invalid" | "incomplete" | "provider_error" | "timed_out" | "failed"
                   | "passed" | "error",
         "cacheable": bool,                 false for infrastructure failures: retried, never reused
         "outputs": {name: object id, ...}, written before the record
         "metrics": {"input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens": int,
                     "cost_usd": float | null, "latency_s": float,
                     "cost_source": "reported" | "priced" | "unknown"   (runs and judgements;
                                    absent before it was kept: clawstore/costs.py source_of)},
         "summary": {flat, kind-specific fields the manifest tables read},
         "error": {"code", "message", ...} | null,
         "started_at", "finished_at": "YYYY-MM-DDTHH:MM:SS.ffffffZ", "build_id": str}

    Version 1 lacked `input` (its input document was named only among the outputs); both are read
    (`from_json`). Readers that only look use the JSON object; writers build this class.
    """

    kind: str
    key: str
    address: dict[str, Any]
    status: str
    cacheable: bool
    outputs: dict[str, Any]
    metrics: dict[str, Any]
    summary: dict[str, Any]
    error: dict[str, Any] | None
    started_at: str
    finished_at: str
    build_id: str
    record_version: int = RECORD_VERSION

    def to_json(self) -> dict[str, Any]:
        return {**field_values(self), "input": self.key}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RecordDoc:
        """A stored record (version 1 or 2); ValueError naming what does not fit."""
        if not isinstance(doc, dict) or doc.get("record_version", 1) not in (1, RECORD_VERSION):
            raise ValueError(f"not a record of version 1 or {RECORD_VERSION}")
        try:
            return cls(**{name: doc[name] for name in _RECORD_FIELDS}, record_version=doc.get("record_version", 1))
        except KeyError as exc:
            raise ValueError(f"a record without {exc.args[0]!r}") from None


def make_record(*, kind: str, key: str, address: dict[str, Any], status: str, cacheable: bool,
                outputs: dict[str, Any], metrics: dict[str, Any], summary: dict[str, Any],
                error: dict[str, Any] | None, started_at: str, finished_at: str, build_id: str
                ) -> dict[str, Any]:
    """A record's JSON object, its metrics checked: a number the manifest could not hold is never written."""
    kept = {name: metrics.get(name) for name in METRIC_FIELDS}
    if "cost_source" in metrics:  # a paid node's (checks and results call no provider)
        kept["cost_source"] = metrics["cost_source"]
    problem = metrics_problem(kept)
    if problem:
        raise ValueError(f"refusing to write a {kind} record: {problem}")
    return RecordDoc(kind=kind, key=key, address=address, status=status, cacheable=cacheable, outputs=outputs,
                     metrics=kept, summary=summary, error=error, started_at=started_at, finished_at=finished_at,
                     build_id=build_id).to_json()


def is_fresh(record: dict[str, Any] | None) -> bool:
    """A cached record counts only if its outcome is the model's, not the infrastructure's."""
    return reusable(record)


_RECORD_FIELDS = tuple(f.name for f in fields(RecordDoc) if f.name != "record_version")
