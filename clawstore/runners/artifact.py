"""RunArtifact: the faithful record of one run, JSON-ready (layout: docs/design/contracts.md).

Shared by every runner. Suite and run-profile ids are deliberately absent: a run is shared by every
campaign whose key matches. Apart from `run_id`, timestamps and durations, the artifact of a run is
a deterministic function of what the provider returned and what the tools did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from clawstore.providers.usage import Usage
from clawstore.values.clock import utc_now_millis as utc_now_iso

SCHEMA_VERSION = 1
RUN_STATUSES = ("success", "invalid", "incomplete", "provider_error", "timed_out", "failed")
EVENT_TYPES = ("message", "tool_call", "tool_result", "runner", "final_output")


class Trace:
    """Append-only list of trace events; `sequence` is 0..n-1 and every event has a real timestamp."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def _add(self, event_type: str, **payload: Any) -> dict[str, Any]:
        event = {"sequence": len(self.events), "event_type": event_type, "timestamp": utc_now_iso(),
                 **payload}
        self.events.append(event)
        return event

    def message(self, role: str, content: Any, name: str | None = None,
                metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._add("message", role=role, content=content, name=name, metadata=metadata or {})

    def tool_call(self, call_id: str, tool_name: str, raw_arguments: Any, parsed_arguments: Any,
                  metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._add("tool_call", call_id=call_id, tool_name=tool_name, raw_arguments=raw_arguments,
                         parsed_arguments=parsed_arguments, metadata=metadata or {})

    def tool_result(self, call_id: str, status: str | None, output: Any,
                    metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._add("tool_result", call_id=call_id, status=status, output=output,
                         metadata=metadata or {})

    def runner(self, name: str, detail: str | None = None,
               metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._add("runner", name=name, detail=detail, metadata=metadata or {})

    def final_output(self, content: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._add("final_output", content=content, metadata=metadata or {})


@dataclass(frozen=True)
class RunError:
    """Why a run did not succeed. `code` e.g. empty_output, timeout, http_error, runner_execution_failed."""

    code: str
    message: str
    error_type: str
    retryable: bool = False
    provider_code: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "error_type": self.error_type,
                "retryable": self.retryable, "provider_code": self.provider_code,
                "metadata": dict(self.metadata)}


class Clock:
    """Wall-clock start/end in ISO form plus a monotonic duration."""

    def __init__(self) -> None:
        self.started_at = utc_now_iso()
        self._t0 = time.monotonic()
        self.completed_at: str | None = None
        self.duration_seconds = 0.0

    def stop(self) -> None:
        self.completed_at = utc_now_iso()
        self.duration_seconds = round(time.monotonic() - self._t0, 6)


@dataclass
class RunArtifact:
    """One run's record. `to_json()` is what the build layer stores (canonical JSON)."""

    run_id: str
    case_id: str
    runner_type: str
    status: str
    started_at: str
    completed_at: str
    duration_seconds: float
    request: dict[str, Any]
    provider: dict[str, Any]
    usage: Usage
    raw_provider_usage: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    output_artifacts: list[dict[str, Any]] = field(default_factory=list)
    error: RunError | None = None
    runner_metadata: dict[str, Any] = field(default_factory=dict)
    # What a run whose cost is unknown spent at least (`cost_known_usd`, `input_tokens_known`, `output_tokens_known`:
    # store/documents.py KNOWN_PART), kept in its `usage`: its answers' believed usage (runners/llm_probe.py)
    known_part: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {self.status!r}")
        if (self.status == "success") != (self.error is None):
            raise ValueError("a run has an error exactly when it did not succeed")

    @property
    def final_output(self) -> str | None:
        """Text of the last non-blank final_output event (what checks and the judge read)."""
        for event in reversed(self.trace):
            if event["event_type"] == "final_output" and str(event.get("content") or "").strip():
                return str(event["content"])
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "identity": {"schema_version": SCHEMA_VERSION, "run_id": self.run_id, "case_id": self.case_id,
                         "runner_type": self.runner_type},
            "status": self.status,
            "timing": {"started_at": self.started_at, "completed_at": self.completed_at,
                       "duration_seconds": self.duration_seconds},
            "request": self.request,
            "provider": self.provider,
            "usage": {"normalized": self.usage.normalized(), "cost_usd": self.usage.cost_usd,
                      "raw_provider_usage": self.raw_provider_usage, **self._rejected(), **self.known_part},
            "trace": self.trace,
            "output_artifacts": self.output_artifacts,
            "error": self.error.to_json() if self.error else None,
            "runner_metadata": self.runner_metadata,
        }

    def _rejected(self) -> dict[str, Any]:
        """A reply's usage not believed: the run's tokens and cost are unknown, and why; a reply that counted no tokens:
        they are unknown, its cost as reported; a cost claw priced itself (a batch line's, from the declared prices):
        `priced` (before session 72 left out, and the record said `reported`). Absent otherwise, so an artifact without
        one keeps its bytes."""
        if self.usage.rejected is not None:
            return {"cost_source": self.usage.cost_source, "usage_rejected": self.usage.rejected}
        if self.usage.tokens_unknown is not None:  # (its cost known only when reported: `cost_source` says which)
            return {**({"cost_source": self.usage.cost_source} if self.usage.cost_source else {}),
                    "tokens_unknown": self.usage.tokens_unknown}
        if self.usage.nothing_sent:  # no request of the run left: a known 0 at any price (runners/pricing.py)
            return {"nothing_sent": True}
        if self.usage.cost_source == "priced":  # claw priced it (a batch line): not the provider's figure
            return {"cost_source": "priced"}
        return {}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunArtifact:
        """Inverse of to_json (for layers that read a stored artifact back)."""
        usage = data["usage"]
        error = data.get("error")
        return cls(
            run_id=data["identity"]["run_id"],
            case_id=data["identity"]["case_id"],
            runner_type=data["identity"]["runner_type"],
            status=data["status"],
            started_at=data["timing"]["started_at"],
            completed_at=data["timing"]["completed_at"],
            duration_seconds=data["timing"]["duration_seconds"],
            request=data["request"],
            provider=data["provider"],
            usage=Usage.from_stored(usage["normalized"], usage.get("cost_usd"), usage.get("cost_source"),
                                    usage.get("usage_rejected"), usage.get("tokens_unknown"),
                                    usage.get("nothing_sent") is True),
            raw_provider_usage=list(usage.get("raw_provider_usage") or []),
            trace=list(data["trace"]),
            output_artifacts=list(data.get("output_artifacts") or []),
            error=RunError(**error) if error else None,
            runner_metadata=dict(data.get("runner_metadata") or {}),
            known_part={name: usage[name] for name in ("cost_known_usd", "input_tokens_known", "output_tokens_known")
                        if name in usage},
        )
