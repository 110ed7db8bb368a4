"""Without llama-cpp-python's server the tier skips with the reason; under CI=true it fails with it.

A real pytest subprocess runs one test of the tier with a `llama_cpp` package that cannot be imported
first on its path (so the check fails whether or not the real one is installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.openclaw.engine import REPO

TARGET = "tests/realserver/test_llama_cpp_server.py::test_a_build_is_judged_by_the_schema_and_a_rebuild_sends_nothing"


def _run_without_server(ci: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    hidden = tmp_path / "hidden" / "llama_cpp"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("hidden by test_ci_policy.py")\n')
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(hidden.parent), str(REPO)])
    if ci is not None:
        env["CI"] = ci
    # -n 0: one test needs no xdist workers; its own --basetemp (see tests/openclaw/test_ci_policy.py)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "--basetemp",
                           str(tmp_path / "inner"), TARGET], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("ci", [None, "true"])
def test_a_missing_server_skips_with_its_reason_and_fails_under_ci(ci: str | None, tmp_path: Path) -> None:
    done = _run_without_server(ci, tmp_path)
    assert "llama-cpp-python server unavailable: llama-cpp-python" in done.stdout, done.stdout[-2000:]
    if ci is None:
        assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout[-2000:]
    else:
        assert done.returncode == 1 and "1 error" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
