"""clawstore as it was at a commit of this repository, for a store built by an older claw."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.workspace import yaml_text

REPO = Path(__file__).resolve().parents[2]
# The last commit whose keys held a judge's `cost` and an OpenClaw run's prices (main when session 58 began).
KEYED_WITH_PRICES = "4fe1f8c"
# Main when session 74 began: its llm_probe runs' keys held the runner settings `timeout_seconds` and `retries`.
KEYED_WITH_HARNESS_SETTINGS = "7bf5566"
# The last commit whose judgements' keys held the judge's `timeout_seconds`, `retries` and `api_key_env` (main when
# session 75 began; its llm_probe runs' keys leave out `timeout_seconds` and `retries` already).
KEYED_WITH_JUDGE_SETTINGS = "17bf44a"
# The last commit whose judgements' keys held the judge's `type` and a rubric's text as written, its whitespace the
# judge's prompt does not show (main when session 76 began).
KEYED_WITH_JUDGE_TYPE = "ac4767c"
# Main when session 77's fix began: its OpenClaw runs' keys held the run profile's `openclaw.docker_cli` as written
# (a path, `/usr/bin/docker`), not the engine's name.
KEYED_WITH_CLI_AS_WRITTEN = "de99f13"


def old_clawstore(into: Path, commit: str = KEYED_WITH_PRICES) -> Path:
    """clawstore at `commit`, extracted under `into` (a PYTHONPATH); a skip when the history is not here. Extracted
    once a process: later calls get the first's tree while it is there, whose bytecode the first old claw wrote (each
    old claw process would compile the old clawstore's modules again, ~0.4 s of CPU)."""
    if (extracted := _EXTRACTED.get(commit)) is not None and extracted.is_dir():
        return extracted
    if shutil.which("git") is None or subprocess.run(
            ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode != 0:
        pytest.skip(f"this repository's history (commit {commit}) is not here")
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "clawstore"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    _EXTRACTED[commit] = into
    return into


_EXTRACTED: dict[str, Path] = {}  # commit: its tree, extracted by this process


def runs_keyed_alike(configs: Path) -> None:
    """The run profile `rp` without `timeout_seconds` and `retries`: this claw's llm_probe run keys leave them out
    since session 74 and the older claws' hold them, so without them both key the runs alike (with them, an older claw
    building beside or after this one runs again the runs this one made: docs/building.md, Keys)."""
    path = configs / "run_profiles" / "rp.yaml"
    data = yaml.safe_load(path.read_text())
    for name in ("timeout_seconds", "retries"):
        data["runner_defaults"].pop(name, None)
    path.write_text(yaml_text(data))


def old_claw(old: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`claw ARGS` run by the clawstore at `old` (environment inherited)."""
    return subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(old)}, capture_output=True, text=True, timeout=120)
