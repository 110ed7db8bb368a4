"""Shared by the benchmarks: generate a synthetic llm_probe workspace of a given size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from clawstore.testing.standin import StandIn

REPO = Path(__file__).resolve().parents[1]
# The campaign an instrumented build builds: generate(..., evaluation=True) makes its suite and profiles.
CAMPAIGN = ("--suite", "bench", "--run-profile", "bench", "--evaluation-profile", "ev", "--progress", "plain")


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


def wait_out_racy_window(root: Path) -> None:
    """Sleep until every file and directory in the workspace `root` (its store/ left out) changed more than the
    stamp's mtime-granularity window (builder/stamp.py RACY_NS) ago, so the next build may leave its stamp: only what
    is left of the window after the build before, not all of it again (a fixed 2.1 s was about 30 s of the suite).
    The tests' one too (tests/support/stamps.py)."""
    from clawstore.builder.stamp import RACY_NS

    newest = 0
    for folder, dirs, files in os.walk(root):
        if folder == str(root):
            dirs[:] = [d for d in dirs if d != "store"]
        for name in (*dirs, *files):
            st = os.lstat(os.path.join(folder, name))
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    wait_s = (newest + RACY_NS + 100_000_000 - time.time_ns()) / 1e9
    if wait_s > 0:
        time.sleep(wait_s)


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


def instrumented_build(bench: str, tree: Path, site: str, out_var: str, env: dict[str, str], cases: int, models: int,
                       judge: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Build a generated campaign (`cases` x `models`, one judgement a run answered `judge`) cold, a fresh store, by
    `claw` of `tree` against the stand-in, in a child whose `sitecustomize` module is `site`: it is told in `out_var`
    where to write its JSON, and `env` the rest. Returns the chat requests the build sent and that JSON; a build
    that fails before writing it ends the bench (`bench` names it) in one line."""
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-instrumented-") as scratch:
        server.script("judge/j", judge)
        root, site_dir, out = Path(scratch) / "ws", Path(scratch) / "site", Path(scratch) / "out.json"
        generate(root, cases, models, evaluation=True, judge_repetitions=1)
        site_dir.mkdir()
        (site_dir / "sitecustomize.py").write_text(site)
        child = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        child.update(env, PYTHONPATH=f"{tree.resolve()}{os.pathsep}{site_dir}", CLAW_STORE=str(Path(scratch) / "store"),
                     OPENROUTER_API_KEY="bench-key-0123456789", OPENROUTER_BASE_URL=server.base_url)
        child[out_var] = str(out)
        sent = len(server.requests)
        done = subprocess.run([sys.executable, "-m", "clawstore.cli", "build", *CAMPAIGN], cwd=root, env=child,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode not in (0, 1) or not out.exists():
            lines = done.stderr.strip().splitlines()
            raise SystemExit(f"{bench}: the build exited {done.returncode}: {lines[-1] if lines else ''}")
        return max(len(server.requests) - sent, 1), json.loads(out.read_text())
