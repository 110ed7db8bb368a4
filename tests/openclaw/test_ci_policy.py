"""Without an engine the real-engine tests skip with the reason; under CI=true they fail with it.

A real pytest subprocess runs one real-engine test with no `docker`/`dockerd` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.openclaw.engine import RAM, RAM_PREFIX, REPO, in_ci

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


def test_an_abandoned_scratch_mount_is_removed_with_no_programs_on_path() -> None:
    """CI failed once this way: a killed session's scratch held dockerd's bind mount, and the next test
    session, run with PATH=/nonexistent, could not find `umount` while clearing it."""
    if not RAM.is_dir() or not os.access(RAM, os.W_OK):
        pytest.skip(f"{RAM} is not writable here")
    dead = subprocess.Popen(["true"])  # a process that has exited: its pid names no live owner
    dead.wait()
    scratch = RAM / f"{RAM_PREFIX}{dead.pid}-abandoned"
    mount = scratch / "netns"
    mount.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(scratch)
        if in_ci():
            pytest.fail(f"cannot mount a tmpfs: {done.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    (mount / "held").write_text("x")
    env = {**os.environ, "PATH": "/nonexistent"}
    cleared = subprocess.run([sys.executable, "-c",
                              "from tests.openclaw.engine import _remove_abandoned_scratch as r; r()"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)
    still_mounted = str(mount) in Path("/proc/self/mounts").read_text()
    if still_mounted:
        subprocess.run(["umount", "-l", str(mount)], check=False)
    assert cleared.returncode == 0, cleared.stderr[-2000:]
    assert not still_mounted
    assert not scratch.exists()
