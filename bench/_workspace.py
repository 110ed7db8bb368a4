"""Shared by the benchmarks: generate a synthetic llm_probe workspace of a given size."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def generate(root: Path, cases: int, models: int, repetitions: int = 1, concurrency: int = 16,
             evaluation: bool = False, judge_repetitions: int = 3) -> None:
    configs = root / "configs"
    for index in range(cases):
        case_dir = configs / "cases" / f"case_{index:05d}"
        case_dir.mkdir(parents=True)
        (case_dir / "test.yaml").write_text(yaml.safe_dump({
            "schema_version": 1, "case_id": f"case_{index:05d}", "title": f"Case {index}",
            "runner": {"type": "llm_probe"},
            "input": {"messages": [{"role": "system", "content": "Answer briefly."},
                                   {"role": "user", "content": f"Question number {index}: what is {index} + 1?"}]},
            "expectations": {"hard_expectations": [{"text": f"Says {index + 1}."}]},
            "deterministic_checks": [{"check_id": "present", "declarative": {"kind": "final_response_present"}}],
            "tags": ["bench"],
        }, sort_keys=False))
    (configs / "suites").mkdir(parents=True)
    (configs / "suites" / "bench.yaml").write_text(yaml.safe_dump({
        "schema_version": 1, "suite_id": "bench", "title": "Bench",
        "models": [{"model_id": f"m{i}", "requested_model": f"vendor/m{i}"} for i in range(models)]}))
    (configs / "run_profiles").mkdir(parents=True)
    (configs / "run_profiles" / "bench.yaml").write_text(yaml.safe_dump({
        "schema_version": 1, "run_profile_id": "bench", "title": "Bench",
        "runner_defaults": {"temperature": 0, "timeout_seconds": 30, "retries": 1},
        "execution_policy": {"max_concurrency": concurrency, "run_repetitions": repetitions}}))
    if evaluation:
        (configs / "evaluation_profiles").mkdir(parents=True)
        (configs / "evaluation_profiles" / "ev.yaml").write_text(yaml.safe_dump({
            "schema_version": 1, "evaluation_profile_id": "ev", "title": "Eval",
            "judge_system_prompt": "Judge strictly and answer in JSON.",
            "judges": [{"judge_id": "j", "type": "llm_probe", "model": "judge/j"}],
            "judge_runs": [{"judge_run_id": "main", "judge_id": "j", "repetitions": judge_repetitions}]}))


def claw(root: Path, *args: str, env: dict[str, str] | None = None) -> float:
    """Run `claw ARGS` in `root` as a subprocess; return its wall time. Fails loudly on a bad exit."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=root,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"claw {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return elapsed


def best_of(runs: int, func) -> float:  # noqa: ANN001 - a thunk returning seconds
    return min(func() for _ in range(runs))
