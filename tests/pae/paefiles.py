"""Writes a workspace's `outputs/` tree in the reference system's (pae 0.1) format, for the import tests.

Only what pae writes for an llm_probe campaign: run and evaluation manifests, `run_<N>.json` with its
fingerprint input, `raw_outputs/judge_<N>.json` (N = repetition + 1). Hashes are pae's: SHA-256 of
the payload's JSON with sorted keys, compact separators and ASCII escapes (no empty `input_turns`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")


@dataclass
class PaeRun:
    model_id: str
    case_id: str
    prompt: str
    repetition: int = 0
    status: str = "success"
    answer: str = "a pae answer"
    judge_scores: list[float] = field(default_factory=lambda: [6.0, 7.0, 8.0])
    cost: float = 0.002


def _write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


def _sha(payload: dict[str, Any]) -> str:
    hashed = {k: v for k, v in payload.items() if not (k == "input_turns" and v == [])}
    return hashlib.sha256(json.dumps(hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
                          .encode()).hexdigest()


def run_payload(run: PaeRun, settings: dict[str, Any]) -> dict[str, Any]:
    return {"attachments": [], "case_metadata": {}, "input_context": {}, "input_turns": [],
            "input_messages": [{"content": "Be brief.", "metadata": {}, "name": None, "role": "system"},
                               {"content": run.prompt, "metadata": {}, "name": None, "role": "user"}],
            "requested_model": f"vendor/{run.model_id}", "runner_config": settings, "runner_type": "llm_probe"}


def _artifact(run: PaeRun) -> dict[str, Any]:
    failed = run.status != "success"
    return {
        "identity": {"case_id": run.case_id, "run_id": f"run_{run.model_id}_{run.case_id}_{run.repetition}",
                     "run_profile_id": "rp", "runner_type": "llm_probe", "schema_version": 1, "suite_id": "main"},
        "status": run.status,
        "timing": {"queued_at": "2026-11-01T10:00:00Z", "started_at": "2026-11-01T10:00:00Z",
                   "completed_at": "2026-11-01T10:00:01Z", "duration_seconds": 1.0},
        "request": {"requested_model": f"vendor/{run.model_id}", "gateway": "openrouter",
                    "execution_parameters": {"temperature": 0.0}, "metadata": {}},
        "provider": {"gateway": "openrouter", "provider_model_id": f"vendor/{run.model_id}"},
        "usage": {"cost_usd": run.cost, "normalized": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25,
                                                       "reasoning_tokens": None, "cached_input_tokens": None,
                                                       "cache_write_tokens": None},
                  "raw_provider_usage": {"prompt_tokens": 20, "completion_tokens": 5, "cost": run.cost}},
        "trace": [] if failed else [
            {"event_type": "message", "role": "assistant", "content": run.answer, "name": None, "metadata": {},
             "sequence": 0, "timestamp": None},
            {"event_type": "final_output", "content": run.answer, "metadata": {}, "sequence": 1, "timestamp": None}],
        "output_artifacts": [],
        "error": {"code": "http_error", "message": "503", "error_type": "provider", "retryable": True,
                  "provider_code": None, "metadata": {}} if failed else None,
        "runner_metadata": {"attempt_count": 1},
    }


def _judge_file(run: PaeRun, system_prompt: str) -> dict[str, Any]:
    iterations, raws = [], []
    for rep, score in enumerate(run.judge_scores):
        iterations.append({"judge_name": "main", "judge_model": "judge/j1", "repetition_index": rep,
                           "status": "success", "dimensions": dict.fromkeys(DIMS, score), "summary": f"rep {rep}",
                           "evidence": {d: ["seen"] for d in DIMS}, "overall_score": score,
                           "overall_evidence": ["seen"], "warnings": [],
                           "raw_result_ref": f"main:repetition:{rep}:attempt:0"})
        raws.append({"raw_result_ref": f"main:repetition:{rep}:attempt:0", "repetition_index": rep,
                     "attempt_index": 0, "status": "success", "judge_model": "judge/j1",
                     "request_messages": [{"role": "system", "content": system_prompt},
                                          {"role": "user", "content": "pae's rendering of the case"}],
                     "response_content": "{}", "usage": {"input_tokens": 300, "output_tokens": 60, "cost": 0.001}})
    return {"schema_version": 1, "judge_name": "main", "judge_model": "judge/j1", "overall_score": None,
            "iteration_results": iterations, "raw_results": raws}


def write_outputs(root: Path, runs: list[PaeRun], settings: dict[str, Any], system_prompt: str) -> dict[str, Path]:
    """The outputs/ tree of one pae `run-eval` of campaign main × rp × ev; returns each run's files by label."""
    run_dir = root / "outputs" / "runs" / "suit_main" / "run_profile_abc123"
    eval_dir = (root / "outputs" / "evaluations" / "suit_main" / "evaluation_profile_abc123"
                / "eval_profile_ev_def456")
    _write(run_dir / "manifest.json", {"schema_version": 1, "suite_id": "main", "run_profile_id": "rp",
                                       "run_profile_fingerprint": "abc123" * 10, "run_repetitions": 1})
    _write(eval_dir / "manifest.json", {"schema_version": 1, "suite_id": "main", "run_profile_id": "rp",
                                        "evaluation_profile_id": "ev", "judge_system_prompt": system_prompt})
    files: dict[str, Path] = {}
    by_case: dict[tuple[str, str], list[PaeRun]] = {}
    for run in runs:
        by_case.setdefault((run.model_id, run.case_id), []).append(run)
    for (model, case), case_runs in by_case.items():
        iterations, eval_iterations = [], []
        for run in case_runs:
            payload = run_payload(run, settings)
            fp = _sha(payload)
            n = run.repetition + 1
            base = run_dir / model / case
            _write(base / f"run_{n}.fingerprint_input.json", {"fingerprint": fp, "fingerprint_version": 1,
                                                                "hash_algorithm": "sha256", "kind": "run",
                                                                "payload": payload})
            _write(base / f"run_{n}.json", _artifact(run))
            iterations.append({"repetition_index": run.repetition, "run_fingerprint": fp})
            files[f"{model}/{case}/run"] = base / f"run_{n}.json"
            files[f"{model}/{case}/fingerprint"] = base / f"run_{n}.fingerprint_input.json"
            if run.status == "success":
                _write(eval_dir / model / case / "raw_outputs" / f"judge_{n}.json", _judge_file(run, system_prompt))
                eval_iterations.append({"repetition_index": run.repetition, "run_fingerprint": fp,
                                        "evaluation_fingerprint": "def456" * 10})
                files[f"{model}/{case}/judge"] = eval_dir / model / case / "raw_outputs" / f"judge_{n}.json"
        _write(run_dir / model / case / "manifest.json", {"model_id": model, "case_id": case,
                                                          "iterations": iterations})
        _write(eval_dir / model / case / "manifest.json", {"model_id": model, "case_id": case,
                                                           "iterations": eval_iterations})
    return files
