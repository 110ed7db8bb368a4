"""Two `claw pull` of one remote into one store at once (a cron job's and one by hand, or two colleagues sharing a
store): the one that moves a ref second finds there exactly the value it came to put. Real processes: the first pull
is held before it moves its refs (tests/remote/proc_pull_held.py) while the second runs to its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.support.prepared import run_here
from tests.support.workspace import standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
PROC = Path(__file__).with_name("proc_pull_held.py")


def test_a_pull_beside_a_pull_of_the_same_remote_succeeds(tmp_path: Path, provider: StandIn,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Before session 77 the second to move a ref failed: `ref campaigns/… changed concurrently: expected None, found
    blake3:…` (the value it came to put), exit 3 (a newcomer's audit: 2 of 3 pulls started together)."""
    remote = str(tmp_path / "shared-remote")
    ws = standard(tmp_path / "ws")
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "pusher"))
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "push", remote, "--progress", "none").code == 0
    head = run_here(ws.root, "refs").stdout.split()[1]
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "puller"))
    Store(tmp_path / "puller")  # (the store the pulls share, made once: neither removes it on failure)
    held = subprocess.Popen([sys.executable, str(PROC), "pull", remote, "--progress", "none"], cwd=ws.root,
                            env=dict(os.environ), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert held.stderr is not None
    said = held.stderr.readline()
    try:
        assert said == "at refs\n", said + held.stderr.read()
        other = run_here(ws.root, "pull", remote, "--progress", "none")
        assert other.code == 0 and "1 ref(s) moved" in other.stdout, other
    finally:
        out, err = held.communicate("go\n", timeout=60)
    assert held.returncode == 0, out + err
    assert "changed concurrently" not in err, err
    refs = run_here(ws.root, "refs").stdout
    assert f"campaigns/main__rp__none\t{head}" in refs, refs
    assert run_here(ws.root, "fsck").code == 0
