"""A bench/ script run as the suite's smoke runs run it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_bench(name: str, args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """bench/<name>.py with `args`, in `cwd`, without the caller's CLAW_STORE (a bench makes its own
    stores)."""
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    return subprocess.run([sys.executable, str(REPO / "bench" / f"{name}.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)
