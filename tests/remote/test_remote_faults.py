"""Kills at random instants: a push, a pull, and a build that pushes as it goes. Nothing committed is lost."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.prepared import ok_here
from tests.support.workspace import Workspace, many_cases

BUILD = ("build", "--suite", "main", "--run-profile", "rp")



def ok(*args: str, cwd: Path) -> str:
    proc = claw(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def spawn(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    return subprocess.Popen([sys.executable, "-m", "clawstore.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def kill_after(proc: subprocess.Popen[str], delay: float) -> None:
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)


def test_killed_pushes_and_pulls_resume_and_lose_nothing(provider: StandIn, tmp_path: Path) -> None:
    rng = random.Random(7)
    remote = str(tmp_path / "remote")
    a = many_cases(tmp_path / "a", cases=12)
    ok_here(*BUILD, cwd=a.root)
    paid = len(provider.requests)
    for _ in range(3):
        kill_after(spawn("push", remote, cwd=a.root), rng.uniform(0.2, 1.2))
        ok_here("fsck", cwd=a.root)
    ok("push", remote, cwd=a.root)

    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    for _ in range(3):
        kill_after(spawn("pull", remote, cwd=b.root), rng.uniform(0.2, 1.2))
        if (b.root / "store").exists():
            ok_here("fsck", cwd=b.root)
    ok("pull", remote, cwd=b.root)
    ok_here("fsck", cwd=b.root)
    ok_here(*BUILD, cwd=b.root)
    assert len(provider.requests) == paid, "every run A paid for reached B"


def test_a_build_killed_mid_campaign_keeps_what_it_pushed(provider: StandIn, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    provider.set_default({"content": "fine", "latency": 0.3})
    monkeypatch.setenv("CLAW_REMOTE_PUSH_INTERVAL", "0.5")
    remote = str(tmp_path / "remote")
    a = many_cases(tmp_path / "a", cases=20, concurrency=2)
    total = 40
    ok_here("remote", "add", "team", remote, cwd=a.root)
    proc = spawn(*BUILD, "--remote", "team", cwd=a.root)
    deadline = time.monotonic() + 120
    while len(provider.requests) < total // 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pushed = len(list((Path(remote) / "packs").glob("*.ids")))
    while len(list((Path(remote) / "packs").glob("*.ids"))) <= pushed and time.monotonic() < deadline:
        time.sleep(0.05)  # an interim push landed after half the runs
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    paid_by_a = len(provider.requests)
    assert paid_by_a < total, "the build was killed before it finished"
    provider.set_default({"content": "fine"})  # the same answers, at once: B's runs need no latency

    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok("pull", remote, cwd=b.root)
    ok_here(*BUILD, cwd=b.root)
    paid_by_b = len(provider.requests) - paid_by_a
    # B pays for what A never committed and pushed: at most the in-flight runs and the last window.
    assert paid_by_b < total
    assert paid_by_a + paid_by_b <= total + 2 * 2 + 4, (paid_by_a, paid_by_b)
    rows = json.loads(ok_here("query", "select count(*) as n from runs", "--format", "json", cwd=b.root))
    assert rows == [{"n": total}]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_build_stopped_mid_campaign_pushes_what_it_committed(provider: StandIn, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               stop: signal.Signals) -> None:
    # Ctrl-C (or a scheduler's SIGTERM) ends a build with what finished committed: the build's last
    # push still sends it, so a colleague pays only for the rest (no interim push in between here).
    provider.set_default({"content": "fine", "latency": 0.1})
    monkeypatch.setenv("CLAW_REMOTE_PUSH_INTERVAL", "600")
    remote = tmp_path / "remote"
    a = many_cases(tmp_path / "a", cases=20, concurrency=2)
    total = 40
    ok_here("remote", "add", "team", str(remote), cwd=a.root)
    proc = spawn(*BUILD, "--remote", "team", cwd=a.root)
    deadline = time.monotonic() + 120
    while len(provider.requests) < total // 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    paid_by_a = len(provider.requests)
    assert paid_by_a < total and "Traceback" not in err, err[-3000:]
    assert "pushed to" in err, err[-3000:]
    provider.set_default({"content": "fine"})  # the same answers, at once: B's runs need no latency

    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok("pull", str(remote), cwd=b.root)
    ok_here(*BUILD, cwd=b.root)
    paid_by_b = len(provider.requests) - paid_by_a
    assert paid_by_a + paid_by_b <= total + 2, (paid_by_a, paid_by_b)  # at most the 2 in flight, again
    ok_here("fsck", cwd=a.root)
    ok_here("fsck", cwd=b.root)


def test_a_build_stopped_while_its_remote_is_out_of_reach_still_says_it_was_stopped(
        provider: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C while the share is gone: the build's last push fails too. The user still gets the build's
    # own ending (exit 130, what finished is kept) and a warning that the push did not happen, not the
    # push's error in its place.
    provider.set_default({"content": "fine", "latency": 0.1})
    monkeypatch.setenv("CLAW_REMOTE_PUSH_INTERVAL", "600")
    share = tmp_path / "share"
    a = many_cases(tmp_path / "a", cases=20, concurrency=2)
    ok_here("remote", "add", "team", str(share / "remote"), cwd=a.root)
    (share / "remote").mkdir(parents=True)  # the share is there when the build starts
    proc = spawn(*BUILD, "--remote", "team", cwd=a.root)
    deadline = time.monotonic() + 120
    while len(provider.requests) < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(share)
    share.write_text("the share is not mounted any more")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "last push to team failed" in err, err[-3000:]
    share.unlink()
    ok("push", "team", cwd=a.root)  # what the stopped build committed goes once the share is back
    ok_here("fsck", cwd=a.root)
