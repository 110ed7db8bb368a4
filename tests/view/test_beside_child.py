"""A `Beside` child never returns into the command that forked it, however its function ends (a Ctrl-C met before
the function's own handling, an exception): it exits there, so the command's cleanup (its locks, temp files, open
pack) never runs twice."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from clawstore.host.beside import Beside
from tests.support.fresh import in_fresh_process

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Beside forks on Linux only")


def test_a_child_whose_function_raises_exits_without_returning_into_the_command(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_raising", tmp_path)  # (on the old code the child went on in the test's process)


def _raising(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()

    def interrupted(requests_fd: int, answers_fd: int) -> None:
        raise KeyboardInterrupt

    try:
        beside = Beside(interrupted)
    except KeyboardInterrupt:
        pass  # (only where the child returned: the parent's Beside was made)
    if os.getpid() != parent:  # (returned into the command: note it, and end here)
        (tmp_path / "returned").write_text(str(os.getpid()))
        os._exit(0)
    assert beside._pid is not None
    _, status = os.waitpid(beside._pid, 0)
    beside._pid = None
    beside.close()
    assert not (tmp_path / "returned").exists()
    assert os.waitstatus_to_exitcode(status) == 1
