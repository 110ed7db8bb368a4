"""Builders for RunArtifact dicts (contracts.md shape) used across the evaluation tests."""

from __future__ import annotations

import json
from typing import Any


def artifact(
    runner: str = "llm_probe",
    status: str = "success",
    trace: list[dict[str, Any]] | None = None,
    *,
    output_artifacts: list[dict[str, Any]] | None = None,
    error: dict[str, Any] | None = None,
    runner_metadata: dict[str, Any] | None = None,
    requested_model: str = "acme/supermodel-9",
    input_context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    events = [dict(e, sequence=i) for i, e in enumerate(trace or [])]
    return {
        "identity": {"case_id": "case_x", "runner_type": runner, "run_id": "run_1"},
        "status": status,
        "timing": {"started_at": "2026-01-01T00:00:00Z", "completed_at": "2026-01-01T00:00:05Z",
                   "duration_seconds": 5.0},
        "request": {"requested_model": requested_model, "gateway": "openrouter",
                    "endpoint": "https://openrouter.ai/api/v1", "execution_parameters": {"temperature": 0.0},
                    "metadata": {"input_context": input_context or {},
                                 "model_selection": {"model_id": "supermodel_9", "requested_model": requested_model}}},
        "provider": {"provider_name": "AcmeCloud", "provider_model_id": requested_model + "-20260101"},
        "usage": {"normalized": {"input_tokens": 123, "output_tokens": 45}, "cost_usd": 0.0123},
        "trace": events,
        "output_artifacts": output_artifacts or [],
        "error": error,
        "runner_metadata": runner_metadata or {"model_id": "supermodel_9"},
    }


def msg(role: str, content: str) -> dict[str, Any]:
    return {"event_type": "message", "role": role, "content": content, "name": None, "metadata": {}}


def final(content: str) -> dict[str, Any]:
    return {"event_type": "final_output", "content": content, "metadata": {}}


def tool_call(call_id: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"event_type": "tool_call", "call_id": call_id, "tool_name": tool,
            "raw_arguments": json.dumps(args), "parsed_arguments": args, "metadata": {}}


def tool_result(call_id: str, output: Any, status: str = "success") -> dict[str, Any]:
    return {"event_type": "tool_result", "call_id": call_id, "status": status, "output": output, "metadata": {}}


def decl(check_id: str, kind: str, dimensions: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    return {"check_id": check_id, "dimensions": dimensions or [], "declarative": {"kind": kind, **fields}}


def judge_reply(overall: float, dims: dict[str, float] | None = None, summary: str = "ok") -> dict[str, Any]:
    names = ("task", "process", "autonomy", "closeness", "efficiency", "spark")
    dims = dims or {}
    return {
        "summary": summary,
        "dimensions": {d: {"evidence": [f"{d} fact"], "score": dims.get(d, overall)} for d in names},
        "overall": {"evidence": ["decisive fact"], "score": overall},
    }
