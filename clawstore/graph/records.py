"""Records: what the action cache maps a node key to (docs/design/contracts.md)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from clawstore.bounds import metrics_problem

# 2: names its input document (`input`, the id its key is) so an entry can be verified from the store
# alone (store/actions.py entry_problem); 1 kept that id only among the outputs. Both are read.
RECORD_VERSION = 2
# Outcomes caused by infrastructure, not by the model: recorded with their cost, never served from cache.
INFRASTRUCTURE_STATUSES = frozenset({"provider_error", "timed_out", "failed"})
METRIC_FIELDS = ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens", "cost_usd", "latency_s")


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_record(*, kind: str, key: str, address: dict[str, Any], status: str, cacheable: bool,
                outputs: dict[str, Any], metrics: dict[str, Any], summary: dict[str, Any],
                error: dict[str, Any] | None, started_at: str, finished_at: str, build_id: str
                ) -> dict[str, Any]:
    """A record, its metrics checked: a number the manifest could not hold is never written."""
    kept = {name: metrics.get(name) for name in METRIC_FIELDS}
    problem = metrics_problem(kept)
    if problem:
        raise ValueError(f"refusing to write a {kind} record: {problem}")
    return {
        "record_version": RECORD_VERSION,
        "kind": kind,
        "key": key,
        "input": key,  # the key is the id of the node's canonical input document, stored beside it
        "address": address,
        "status": status,
        "cacheable": cacheable,
        "outputs": outputs,
        "metrics": kept,
        "summary": summary,
        "error": error,
        "started_at": started_at,
        "finished_at": finished_at,
        "build_id": build_id,
    }


def is_fresh(record: dict[str, Any] | None) -> bool:
    """A cached record counts only if its outcome is the model's, not the infrastructure's."""
    return bool(record) and bool(record.get("cacheable"))
