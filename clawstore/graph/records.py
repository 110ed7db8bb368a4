"""Records: what the action cache maps a node key to (the model: store/documents.py RecordDoc)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from clawstore.store.actions import reusable
from clawstore.store.documents import Metrics, RecordDoc, metrics_problem

# Outcomes caused by infrastructure, not by the model: recorded with their cost, never served from cache.
INFRASTRUCTURE_STATUSES = frozenset({"provider_error", "timed_out", "failed"})


def utc_now() -> str:
    """Now as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (isoformat: a third of strftime's time, a few per node)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def make_record(*, kind: str, key: str, address: dict[str, Any], status: str, cacheable: bool,
                outputs: dict[str, Any], metrics: dict[str, Any], summary: dict[str, Any],
                error: dict[str, Any] | None, started_at: str, finished_at: str, build_id: str
                ) -> dict[str, Any]:
    """A record's JSON object, its metrics checked: a number the manifest could not hold is never written."""
    kept = Metrics.of(metrics)
    problem = metrics_problem(kept.to_json())
    if problem:
        raise ValueError(f"refusing to write a {kind} record: {problem}")
    return RecordDoc(kind=kind, key=key, address=address, status=status, cacheable=cacheable, outputs=outputs,
                     metrics=kept, summary=summary, error=error, started_at=started_at, finished_at=finished_at,
                     build_id=build_id).to_json()


def is_fresh(record: dict[str, Any] | None) -> bool:
    """A cached record counts only if its outcome is the model's, not the infrastructure's."""
    return reusable(record)

