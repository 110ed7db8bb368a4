"""The config models build their validators when they first validate (config/models/base.py, defer_build): a
workspace of llm_probe cases, a suite and a run profile never builds an agent's or an evaluation profile's, and what
is validated is validated as before (the rest of tests/config)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.workspace import standard

REPO = Path(__file__).resolve().parents[2]

# `claw validate` in this process, then which of the models built their validator.
VALIDATE_THEN_SAY_BUILT = textwrap.dedent("""
    from clawstore.cli import main
    from clawstore.config.models import Agent, EvaluationProfile, RunProfile, Suite, TestCase

    try:
        main(["validate"])
    except SystemExit as exc:
        assert exc.code == 0, exc.code
    models = (Agent, EvaluationProfile, RunProfile, Suite, TestCase)
    print(" ".join(m.__name__ for m in models if m.__pydantic_complete__))
""")


def test_validate_builds_only_the_validators_of_the_workspace_s_kinds(tmp_path: Path) -> None:
    ws = standard(tmp_path / "ws")
    done = subprocess.run([sys.executable, "-c", VALIDATE_THEN_SAY_BUILT], capture_output=True, text=True,
                          cwd=ws.root, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "RunProfile Suite TestCase"  # (not Agent, not EvaluationProfile)
