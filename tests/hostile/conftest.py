"""Users of the signing tests: each a config directory (key, trust list) and the claw processes they run (`here`: a step
that prepares what a test is about, run in the test's own process)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import _claw_command
from tests.support.once import copied, made_once
from tests.support.prepared import ok_here
from tests.support.workspace import SECRET, Workspace, standard

RUNS = ("--suite", "main", "--run-profile", "rp")


class User:
    """One person: a config directory (key, trust list) and the claw processes they run."""

    def __init__(self, home: Path, standin: StandIn):
        self.home = home
        self.env = {**os.environ, "XDG_CONFIG_HOME": str(home), "OPENROUTER_API_KEY": SECRET,
                    "OPENROUTER_BASE_URL": standin.base_url}
        self.env.pop("CLAW_STORE", None)

    def claw(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*_claw_command(), *args], cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=120)

    def ok(self, *args: str, cwd: Path) -> str:
        done = self.claw(*args, cwd=cwd)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def here(self, *args: str, cwd: Path) -> str:
        """`claw ARGS` as this user in the test's own process (tests/support/prepared.py), for a step that prepares
        what a test is about; it succeeded: its stdout."""
        with pytest.MonkeyPatch.context() as patch:
            for name in ("XDG_CONFIG_HOME", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL"):
                patch.setenv(name, self.env[name])
            return ok_here(*args, cwd=cwd)

    def key(self, cwd: Path) -> str:
        return self.here("key", "show", cwd=cwd).strip()


@pytest.fixture
def alice(tmp_path: Path, standin: StandIn) -> User:
    return User(tmp_path / "alice-config", standin)


@pytest.fixture
def bob(tmp_path: Path, standin: StandIn) -> User:
    return User(tmp_path / "bob-config", standin)


def _build_and_push(root: Path) -> None:
    with StandIn() as standin:
        alice = User(root / "alice-config", standin)
        a = standard(root / "alice")
        alice.ok("build", *RUNS, cwd=a.root)
        alice.ok("push", str(root / "share" / "remote"), cwd=a.root)


@pytest.fixture
def pushed(alice: User, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, Path]:
    """Alice's workspace built and pushed to tmp_path/share/remote, her key beside (it signs the refs): made once in
    the run and copied here. (Her runs' keys hold another stand-in's address: a build here pays for them again.)"""
    copied(made_once(tmp_path_factory, "hostile-alice-pushed", _build_and_push), tmp_path,
           alice.home.name, "alice", "share")
    return Workspace(tmp_path / "alice"), tmp_path / "share" / "remote"
