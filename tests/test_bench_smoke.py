"""Every benchmark in bench/ runs to the end at a smoke size, so a refactor cannot leave one crashing.

No timing is asserted here: the figures only mean something at full size on a quiet machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tiny arguments for each bench script. openclaw_bench needs the real container engine: its smoke run
# lives with the real-engine tests (tests/openclaw/test_openclaw_bench.py).
SMOKE = {
    "config_bench": ["--cases", "20", "--rounds", "1"],
    "store_bench": ["--big-mib", "8", "--small-count", "50", "--one-mib-count", "2", "--rounds", "1"],
    "archive_bench": ["--mib", "2", "--gc-objects", "200"],
    "build_bench": ["--cases", "5", "--models", "2"],
    "eval_bench": ["--cases", "5", "--models", "2"],
    "query_bench": ["--results", "2000", "--per-build", "1000", "--nodes", "200"],
    "remote_bench": ["--objects", "200", "--size", "512", "--repeat", "2", "--link-mib", "50"],
    "s3client_bench": ["--files", "2", "--mib", "1"],
    "distributed_bench": ["--runs", "10", "--latency", "0.05", "--concurrency", "4", "--repeat", "1"],
    "view_bench": ["--runs", "40", "--models", "4"],
    "verify_bench": ["--runs", "50", "--repeat", "1"],
    "head_bench": ["--cases", "20", "--models", "2"],
    "interim_packs_bench": ["--pushes", "5", "--runs", "2"],
}


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {p.stem for p in (REPO / "bench").glob("*_bench.py")}
    assert scripts - {"openclaw_bench"} == set(SMOKE)


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_bench_runs_at_smoke_size(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    proc = subprocess.run([sys.executable, str(REPO / "bench" / f"{name}.py"), *SMOKE[name]], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip(), "a bench prints its figures"
