"""The `claw` test runner and the fixtures of an llm_probe workspace against the stand-in provider."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.testing.standin import StandIn
from tests.support.workspace import SECRET, Workspace, standard


@pytest.fixture
def env(standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    values = {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
              "CLAW_STORE": str(tmp_path / "store")}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


@pytest.fixture
def ws(tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Workspace:
    workspace = standard(tmp_path / "ws")
    monkeypatch.chdir(workspace.root)
    return workspace


class Claw:
    """Runs `claw` in-process (fast) or as a subprocess (for signals)."""

    def __init__(self, root: Path):
        self.root = root

    def __call__(self, *args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    def build(self, *extra: str, suite: str = "main", profile: str = "rp") -> tuple[int, str, str]:
        return self("build", "--suite", suite, "--run-profile", profile, *extra)

    def one_config_error(self) -> str:
        """`claw validate` refusing the workspace (exit 2) with exactly one line naming a config file: that line."""
        code, out, err = self("validate")
        lines = [line for line in (out + err).splitlines() if line.startswith("configs/")]
        assert code == 2, out + err
        assert len(lines) == 1, lines
        return lines[0]

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "clawstore.cli", *args], cwd=self.root, env=dict(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def claw(ws: Workspace) -> Claw:
    return Claw(ws.root)


def requests_sent(standin: StandIn, count: int, timeout: float = 30) -> None:
    """Wait until the stand-in has been asked at least `count` requests (a build beside the test reached that point)."""
    deadline = time.monotonic() + timeout
    while len(standin.requests) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(standin.requests) >= count, standin.requests
