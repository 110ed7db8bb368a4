"""`claw` run in the test's own process, for the steps that prepare what a test is about (a build, a push, a remote
added) and the queries that read what it left: the same commands through the same front (clawstore/project), without
the ~0.3 s start of a child process each. The call a test is about stays a real `claw` process
(tests/config/workspace_builder.py `claw`).

Run as `claw` runs there: in the workspace's directory, without the caller's CLAW_STORE (the workspace's own store),
or with it (`run_here`: the workspaces of tests/support/claw.py name their store by it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from tests.hostile.attack import Outcome
from tests.support.workspace import SECRET


def claw_here(*args: str, cwd: Path, keep_store: bool = False) -> tuple[int, str, str]:
    """`claw ARGS` in this process, in `cwd` (CLAW_STORE unset unless `keep_store`): exit code, stdout, stderr."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        if not keep_store:
            patch.delenv("CLAW_STORE", raising=False)
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def claw_real_or_here(*args: str, cwd: Path, real: bool) -> tuple[int, str, str]:
    """`claw ARGS` in `cwd` (CLAW_STORE unset), by a real child process when `real` (tests/config/workspace_builder.py
    `claw`), else in this process: exit code, stdout, stderr. For a refusal several commands or inputs share: each
    command and input printed once by a real process, the others through the same front here."""
    if not real:
        return claw_here(*args, cwd=cwd)
    from tests.config.workspace_builder import claw

    done = claw(*args, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def ok_here(*args: str, cwd: Path) -> str:
    """`claw ARGS` in this process; it succeeded and showed no secret: its stdout."""
    code, out, err = claw_here(*args, cwd=cwd)
    assert code == 0, err
    assert SECRET not in out + err
    return out


def run_here(cwd: Path, *args: str) -> Outcome:
    """`claw ARGS` in this process as tests/hostile/attack.py's `run_claw` runs it in a child: in `cwd`, the
    environment as it is (CLAW_STORE kept); its exit code, stdout and stderr."""
    return Outcome(*claw_here(*args, cwd=cwd, keep_store=True))
