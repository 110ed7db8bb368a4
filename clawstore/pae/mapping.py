"""How a pae run and judgement map onto claw's: the match check, and the conversions."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from clawstore.pae.layout import PaeFileError, PaeRun
from clawstore.store.documents import metrics_problem

if TYPE_CHECKING:
    from clawstore.config.campaign import CampaignItem


def _normalized(value: Any) -> Any:
    """pae's normalisation of hashed sub-trees: null map entries dropped (numbers compare by value)."""
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _messages(messages: Any) -> list[tuple[Any, Any]]:
    return [(m.get("role"), m.get("content")) for m in messages or [] if isinstance(m, dict)]


def mismatch(payload: dict[str, Any], item: CampaignItem) -> str | None:
    """The first part of what pae ran that differs from what claw would run now (None: they match)."""
    case = item.case.case
    settings = {k: v for k, v in (payload.get("runner_config") or {}).items() if k != "run_repetition_index"}
    attachments = sorted((a.name, hashlib.sha256(a.data).hexdigest(), len(a.data)) for a in item.attachments)
    pae_attachments = sorted((a.get("name"), a.get("sha256"), a.get("byte_size"))
                             for a in payload.get("attachments") or [] if isinstance(a, dict))
    checks = [
        ("runner_type", payload.get("runner_type") == item.runner_type),
        ("requested_model", payload.get("requested_model") == item.resolved_model),
        ("input_messages", _messages(payload.get("input_messages")) == [
            (m.role, m.content) for m in item.messages if not (m.metadata and "attachment" in m.metadata)]),
        ("input_turns", _messages(payload.get("input_turns")) == [(m.role, m.content) for m in item.turns]),
        ("runner_config", _normalized(settings) == _normalized(dict(item.settings))),
        ("input_context", _normalized(payload.get("input_context") or {}) == _normalized(case.input.context or {})),
        ("case_metadata", _normalized(payload.get("case_metadata") or {}) == _normalized(case.metadata or {})),
        ("attachments", pae_attachments == attachments),
    ]
    return next((name for name, same in checks if not same), None)


def claw_artifact(run: PaeRun) -> dict[str, Any]:
    """pae's RunArtifact in claw's shape (contracts.md): same content, suite/profile ids dropped."""
    from clawstore.runners.artifact import RunArtifact

    a = run.artifact
    try:
        usage = a["usage"]
        raw_usage = usage.get("raw_provider_usage")
        normalized = {k: int(v) for k, v in (usage.get("normalized") or {}).items() if isinstance(v, int | float)}
        artifact = RunArtifact.from_json({
            "identity": {"run_id": a["identity"].get("run_id"), "case_id": a["identity"]["case_id"],
                         "runner_type": a["identity"].get("runner_type")},
            "status": a["status"],
            "timing": {"started_at": a["timing"].get("started_at"), "completed_at": a["timing"].get("completed_at"),
                       "duration_seconds": float(a["timing"].get("duration_seconds") or 0.0)},
            "request": a["request"],
            "provider": a.get("provider") or {},
            "usage": {"normalized": normalized, "cost_usd": usage.get("cost_usd"),
                      "raw_provider_usage": raw_usage if isinstance(raw_usage, list) else
                      [raw_usage] if isinstance(raw_usage, dict) else []},
            "trace": a["trace"],
            "output_artifacts": a.get("output_artifacts") or [],
            "error": a.get("error"),
            "runner_metadata": {**(a.get("runner_metadata") or {}), "imported_from": "pae"},
        })
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # (a field of another type than pae's)
        raise PaeFileError(run.path, f"not a RunArtifact claw can read ({type(exc).__name__}: {exc})") from None
    return artifact.to_json()


def judge_iteration(path: Any, judge_file: dict[str, Any], repetition: int, judge_run_id: str) -> tuple[Any, dict]:
    """(claw JudgeIteration, the request pae sent) of one successful judge repetition in a pae judge file."""
    from clawstore.builder.eval_layer import judge_metrics
    from clawstore.evaluate.judge import TOKEN_FIELDS, JudgeIteration
    from clawstore.evaluate.judge_contract import JudgeScores

    found = [r for r in judge_file["iteration_results"]
             if isinstance(r, dict) and r.get("repetition_index") == repetition]
    if not found or found[0].get("status") != "success":
        raise LookupError(f"judge repetition {repetition} did not succeed in pae")
    result = found[0]
    attempts = [r for r in judge_file["raw_results"] if isinstance(r, dict) and r.get("repetition_index") == repetition]
    usage: dict[str, Any] = {**{name: 0 for name in TOKEN_FIELDS}, "cost_usd": None}
    for attempt in attempts:
        reported = attempt.get("usage") or {}
        if not isinstance(reported, dict):
            raise PaeFileError(path, f"judge repetition {repetition}: usage is not a mapping")
        for name, value in reported.items():
            if name == "cost" and isinstance(value, int | float):
                usage["cost_usd"] = (usage["cost_usd"] or 0.0) + float(value)
            elif name in usage and isinstance(value, int):
                usage[name] += value
    problem = metrics_problem(judge_metrics(usage, 0.0))  # what the judgement's record would refuse
    if problem:
        raise PaeFileError(path, f"judge repetition {repetition}: {problem}")
    try:
        scores = JudgeScores.from_dict({**result, "warnings": result.get("warnings") or []})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PaeFileError(path, f"judge repetition {repetition}: unreadable scores ({exc})") from None
    iteration = JudgeIteration(
        status="success", scores=scores,
        attempts=[{"attempt": a.get("attempt_index"), "status": a.get("status"), "response": a.get("response_content"),
                   "usage": a.get("usage"), "imported_from": "pae"} for a in attempts],
        usage=usage, warnings=list(result.get("warnings") or []), judge_run_id=judge_run_id,
        repetition=repetition, judge_model=result.get("judge_model"))
    first = attempts[0] if attempts else {}
    request = {"model": result.get("judge_model"), "messages": first.get("request_messages") or []}
    return iteration, request
