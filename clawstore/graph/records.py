"""Records: what the action cache maps a node key to (the model: store/documents.py RecordDoc)."""

from __future__ import annotations

from typing import Any

from clawstore.store.actions import reusable
from clawstore.store.documents import metrics_json, metrics_problem, record_json

# Outcomes caused by infrastructure, not by the model: recorded with their cost, never served from cache.
INFRASTRUCTURE_STATUSES = frozenset({"provider_error", "timed_out", "failed"})
# ... except these: an OpenClaw agent that used its whole timeout while its model answered (runners/openclaw/runner.py
# AGENT_TIMEOUT) is `timed_out`, and its own outcome, kept like llm_probe's `max_turns_exceeded`.
AGENT_OUTCOME_CODES = frozenset({"openclaw_agent_timeout"})


def kept_outcome(status: str, error: dict[str, Any] | None) -> bool:
    """Is a run ending in `status` with `error` the model's (or agent's) outcome, cached, rather than a fault?"""
    return status not in INFRASTRUCTURE_STATUSES or (error or {}).get("code") in AGENT_OUTCOME_CODES


def make_record(*, kind: str, key: str, address: dict[str, Any], status: str, cacheable: bool,
                outputs: dict[str, Any], metrics: dict[str, Any], summary: dict[str, Any],
                error: dict[str, Any] | None, started_at: str, finished_at: str, build_id: str
                ) -> dict[str, Any]:
    """A record's JSON object, its metrics checked: a number the manifest could not hold is never written."""
    kept = metrics_json(metrics)
    problem = metrics_problem(kept)
    if problem:
        raise ValueError(f"refusing to write a {kind} record: {problem}")
    return record_json(kind=kind, key=key, address=address, status=status, cacheable=cacheable, outputs=outputs,
                       metrics=kept, summary=summary, error=error, started_at=started_at, finished_at=finished_at,
                       build_id=build_id)


def is_fresh(record: dict[str, Any] | None) -> bool:
    """A cached record counts only if its outcome is the model's, not the infrastructure's."""
    return reusable(record)

