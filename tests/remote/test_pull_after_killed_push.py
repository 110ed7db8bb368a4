"""A pull after a `claw push` SIGKILLed once the remote's ref had moved: the remote holds this store's own head, its
tracking ref was never written, and a build then moved the local head. Nobody else pushed: the pull says nothing of
"both sides", records the tracking ref and keeps the local head, and the next push moves the remote on. Real
processes: the push is held where it writes its tracking ref (the test holds the store's refs lock, as a `claw refs`
or a build would for an instant) and killed there once the remote's ref holds its head."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.remote import pull, push
from clawstore.remote.backends import Backend, open_backend
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.core.locks import exclusive
from clawstore.store.refs import read_ref
from clawstore.testing.standin import StandIn
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
HEAD = "campaigns/main__rp__none"
TRACKING = "remotes/team/" + HEAD


def _claw(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=cwd, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)


def _remote_head(remote: Backend | str) -> str | None:
    now = (open_backend(remote, None) if isinstance(remote, str) else remote).read_ref("refs/" + HEAD)
    return None if now is None else now.value


def _push_killed_past_its_swap(ws: Workspace, store: Path, remote_url: str, head: str) -> None:
    """A real `claw push` SIGKILLed after the remote's ref moved to `head`, before its tracking ref was written."""
    with exclusive(store, "refs"):  # (the push's tracking ref waits on it: the swap, done before, is not held)
        killed = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "push", "team", "--progress", "none"],
                                  cwd=ws.root, env=dict(os.environ), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            remote = open_backend(remote_url, None)  # (one client, asked again and again)
            deadline = time.monotonic() + 60
            while _remote_head(remote) != head and killed.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert killed.poll() is None, killed.communicate()[1]  # still running: held at its tracking ref
            assert _remote_head(remote) == head
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=10)
    assert read_ref(store, TRACKING) is None  # never written


@pytest.mark.timeout(180)
@pytest.mark.parametrize("remote_url", ["dir", "s3"], indirect=True)
def test_a_pull_after_a_push_killed_past_its_swap_takes_the_remote_head_as_its_own(
        tmp_path: Path, provider: StandIn, remote_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before session 76 the pull said "both sides changed it: kept this store's head; ... then push" though the
    remote's head was this store's own (exit 0, but a conflict announced that nobody had made)."""
    store = tmp_path / "store"
    monkeypatch.setenv("CLAW_STORE", str(store))
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "remote", "add", "team", remote_url).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    first = read_ref(store, HEAD)
    assert first is not None
    _push_killed_past_its_swap(ws, store, remote_url, first)
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0  # a build moves the local head
    second = read_ref(store, HEAD)
    assert second not in (None, first)
    pulled = _claw(ws.root, "pull", "team", "--progress", "none")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert "both sides" not in pulled.stdout, pulled.stdout
    assert "0 ref(s) moved" in pulled.stdout and "newer head" in pulled.stdout, pulled.stdout
    assert read_ref(store, HEAD) == second  # the local head kept
    assert read_ref(store, TRACKING) == first  # the remote's, recorded
    pushed = _claw(ws.root, "push", "team", "--progress", "none")
    assert pushed.returncode == 0 and "1 ref(s) moved" in pushed.stdout, pushed.stdout + pushed.stderr
    assert _remote_head(remote_url) == second


@pytest.mark.timeout(240)
@pytest.mark.parametrize("remote_url", ["s3"], indirect=True)
def test_a_pull_after_a_killed_push_still_names_a_colleague_s_push(
        tmp_path: Path, provider: StandIn, remote_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The note of the killed push's value does not hide a real conflict: a colleague pulled it, built an edit and
    pushed; this store built another edit; its pull says both sides changed the head."""
    store, theirs = tmp_path / "store", tmp_path / "colleague"
    monkeypatch.setenv("CLAW_STORE", str(store))
    ws, ws_b = standard(tmp_path / "ws"), standard(tmp_path / "ws-b")
    for each in (ws, ws_b):
        assert run_here(each.root, "remote", "add", "team", remote_url).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    first = read_ref(store, HEAD)
    assert first is not None
    _push_killed_past_its_swap(ws, store, remote_url, first)
    monkeypatch.setenv("CLAW_STORE", str(theirs))
    assert run_here(ws_b.root, "pull", "team", "--progress", "none").code == 0
    ws_b.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    assert run_here(ws_b.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws_b.root, "push", "team", "--progress", "none").code == 0
    colleague = read_ref(theirs, HEAD)
    assert _remote_head(remote_url) == colleague != first
    monkeypatch.setenv("CLAW_STORE", str(store))
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    ours = read_ref(store, HEAD)
    pulled = _claw(ws.root, "pull", "team", "--progress", "none")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert "both sides changed it" in pulled.stdout, pulled.stdout
    assert read_ref(store, HEAD) == ours


def test_a_pull_after_a_build_since_the_last_push_keeps_the_newer_head_quietly(tmp_path: Path) -> None:
    """The plain case: a push, a build, a pull, the remote untouched meanwhile. Before session 76 it said "both sides
    changed it" too (the remote's value, the tracking ref's, was not told from another push's)."""
    store = Store(tmp_path / "store")
    remote = Remote("team", str(tmp_path / "remote"), None)
    with store.batch():
        store.set_ref(HEAD, store.put_json({"head": "first"}))
    first = store.get_ref(HEAD)
    assert push.push(store, remote).refs_moved == [HEAD]
    with store.batch():
        store.set_ref(HEAD, store.put_json({"head": "second"}))
    second = store.get_ref(HEAD)
    report = pull.pull(store, remote)
    assert report.refs_moved == [] and "both sides" not in report.summary(), report.summary()
    assert "newer head" in report.refs_kept[HEAD], report.summary()
    assert store.get_ref(HEAD) == second and store.get_ref(TRACKING) == first
