"""The repository's .gitignore covers what claw writes by default in a workspace."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.testing.simulated import script_simulated_provider
from clawstore.testing.standin import StandIn
from tests.docs.doc_blocks import EXAMPLES, REPO

CAMPAIGN = ["--suite", "llm_probe_smoke", "--run-profile", "standard", "--evaluation-profile", "default_judge"]


def test_default_outputs_leave_git_status_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws / "configs")
    shutil.copy(REPO / ".gitignore", ws / ".gitignore")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(ws)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "configs"], check=True)
    # (in-process, from the workspace: what each command writes by default is the same in a process of its own)
    for name in [k for k in os.environ if k.startswith("CLAW_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(ws)
    with StandIn() as server:
        script_simulated_provider(server)
        monkeypatch.setenv("OPENROUTER_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test")
        for args in (["build", *CAMPAIGN], ["report", *CAMPAIGN], ["view", *CAMPAIGN], ["query", "leaderboard"],
                     ["archive", "export", *CAMPAIGN, "-o", "campaign.claw"]):
            result = CliRunner().invoke(main, args, catch_exceptions=False)
            assert result.exit_code == 0, (args, result.stderr)
    assert (ws / "store").is_dir() and (ws / "outputs").is_dir()
    status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=all"], capture_output=True,
                            text=True, check=True).stdout
    assert status == "", status
