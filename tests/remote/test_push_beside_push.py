"""Two `claw push` of one store at once (a `claw build --remote` pushing at its end and a push by hand, or a push run
twice): the one that swaps the remote's ref second finds there exactly the value it came to put. Real processes: the
first push is held before its swap (tests/remote/proc_push_held.py) while the second runs to its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.prepared import run_here
from tests.support.workspace import standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
PROC = Path(__file__).with_name("proc_push_held.py")


@pytest.mark.parametrize("remote_url", ["dir", "s3"], indirect=True)
def test_a_push_beside_a_push_of_the_same_state_succeeds(tmp_path: Path, provider: StandIn, remote_url: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Before session 74 the second swap failed: `remote ref refs/campaigns/… was changed by another push: run claw
    pull, then push again`, exit 1, though the remote's ref was this store's head (session 74's races audit: two
    pushes of one store at once after a build, 2 of 4 tries)."""
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    held = subprocess.Popen([sys.executable, str(PROC), "push", remote_url, "--progress", "none"], cwd=ws.root,
                            env=dict(os.environ), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert held.stderr is not None
    said = held.stderr.readline()
    try:
        assert said == "at swap\n", said + held.stderr.read()
        other = run_here(ws.root, "push", remote_url, "--progress", "none")
        assert other.code == 0, other
    finally:
        out, err = held.communicate("go\n", timeout=60)
    assert held.returncode == 0, out + err
    assert "changed by another push" not in err, err
    again = run_here(ws.root, "push", remote_url, "--progress", "none")  # (nothing left to send, nothing to move)
    assert again.code == 0 and "0 ref(s) moved" in again.stdout, again
