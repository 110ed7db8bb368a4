"""Without an engine the real-engine tests skip with the reason; under CI=true they fail with it.

A real pytest subprocess runs one real-engine test with no `docker`/`dockerd` on PATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.openclaw.engine import REPO

TARGET = "tests/openclaw/test_real_engine.py::test_timeout_ends_the_run_and_leaves_no_container"


def _run_without_engine(ci: str | None, basetemp: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CLAW_TEST_DOCKER_HOST")}
    env["PATH"] = "/nonexistent"  # no docker, no dockerd
    if ci is not None:
        env["CI"] = ci
    # Its own --basetemp: the shared /tmp/pytest-of-<user> may hold many big dirs from other sessions,
    # and pytest's clean-up of old ones there took over 120 s on a loaded machine.
    # (-n 0: one test needs no xdist workers, whose start took most of its 6 s)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "--basetemp",
                           str(basetemp), TARGET], cwd=REPO, env=env, capture_output=True, text=True, timeout=280,
                          check=False)


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_missing_engine_is_a_skip_with_its_reason(ci: str | None, tmp_path: Path) -> None:
    done = _run_without_engine(ci, tmp_path / "inner")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 skipped" in done.stdout
    assert "SKIPPED" in done.stdout and "dockerd/docker not installed" in done.stdout  # -rs shows why


def test_under_ci_a_missing_engine_is_a_failure_with_its_reason(tmp_path: Path) -> None:
    done = _run_without_engine("true", tmp_path / "inner")
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 error" in done.stdout and "skipped" not in done.stdout
    assert "real OpenClaw engine unavailable: dockerd/docker not installed" in done.stdout
