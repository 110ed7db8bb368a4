"""A ref swap on S3 whose answer is lost: the server applied the conditional PUT (`If-None-Match: *` to create,
`If-Match: <ETag>` to replace), then the connection broke before the answer. botocore sends the PUT again, and the
retry meets the push's own first write: 412 Precondition Failed. A real proxy in front of the loopback S3 server (real
HTTP, real boto3) applies the first conditional ref PUT and cuts the connection before answering."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.remote import pull, push
from clawstore.remote.backends import RemoteRefConflict, S3Backend
from clawstore.remote.config import Remote
from clawstore.store import Store
from tests.support.s3proxy import Call, S3Proxy
from tests.support.s3server import make_bucket


class LosingProxy(S3Proxy):
    """Forwards everything to `target`; the first conditional PUT of a ref is applied, then its connection is cut
    before the answer (a reset after the server acted: what botocore retries)."""

    def __init__(self, target: str, meanwhile: Callable[[], None] | None = None, stall: bool = False):
        self.meanwhile = meanwhile  # run once the cut PUT was applied
        self.stall = stall  # every conditional ref PUT applied, its answer withheld until the proxy closes
        self.cut: list[str] = []  # the ref PUTs whose answer was lost
        self.puts: list[tuple[str, int]] = []  # every conditional ref PUT: (path, status the server gave)
        super().__init__(target)

    def answer(self, call: Call) -> None:
        reply = call.forward()
        conditional = call.command == "PUT" and "/refs/" in call.path and (
            "If-Match" in call.headers or "If-None-Match" in call.headers)
        if conditional:
            self.puts.append((call.path, reply.status_code))
        if conditional and self.stall:
            call.hold(60)
            return
        if conditional and not self.cut:
            self.cut.append(call.path)
            if self.meanwhile is not None:
                self.meanwhile()
            call.cut()
            return
        call.reply(reply)


def _head(store: Store, name: str, text: str) -> str:
    with store.batch():
        store.set_ref(name, store.put_json({"head": text}))
    value = store.get_ref(name)
    assert value is not None
    return value


@pytest.mark.parametrize("replace", [False, True], ids=["create", "replace"])
def test_a_ref_swap_whose_answer_is_lost_is_this_push_s_own(replace: bool, aws_env: str, tmp_path: Path) -> None:
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    store = Store(tmp_path / "a")
    direct = Remote("team", f"s3://{bucket}/bench", aws_env)
    if replace:
        _head(store, "campaigns/c", "first")
        assert push.push(store, direct).refs_moved == ["campaigns/c"]
    head = _head(store, "campaigns/c", "second")
    proxy = LosingProxy(aws_env)
    try:
        report = push.push(store, Remote("team", f"s3://{bucket}/bench", proxy.url))
    finally:
        proxy.close()
    assert proxy.cut == [f"/{bucket}/bench/refs/campaigns/c"], proxy.puts  # the answer was lost once...
    assert [status for _, status in proxy.puts] == [200, 412], proxy.puts  # ...and the retry met its own write
    assert report.refs_moved == ["campaigns/c"], report.summary()  # this push moved it, and says so
    assert "1 ref(s) moved" in report.summary()
    assert pull.pull(Store(tmp_path / "probe"), direct).refs_moved == ["campaigns/c"]
    assert Store(tmp_path / "probe").get_ref("campaigns/c") == head  # the remote holds the head pushed
    assert store.get_ref("remotes/team/campaigns/c") == head  # and the tracking ref agrees
    again = push.push(store, direct)
    assert again.refs_moved == [] and again.packs == 0, again.summary()  # up to date: nothing sent, nothing moved


def test_a_lost_answer_whose_ref_another_push_moved_meanwhile_is_a_conflict(aws_env: str) -> None:
    """The retry's 412 is this push's own write only if the ref holds its value: here a colleague's push moved the
    ref between the lost answer and the retry, and the swap reports the conflict."""
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    direct = S3Backend(bucket, "bench", aws_env)
    ours, theirs = "blake3:" + "aa" * 32, "blake3:" + "bb" * 32

    def colleague() -> None:
        direct.swap_ref("refs/campaigns/c", theirs, direct.read_ref("refs/campaigns/c"))

    proxy = LosingProxy(aws_env, colleague)
    try:
        with pytest.raises(RemoteRefConflict, match="refs/campaigns/c"):
            S3Backend(bucket, "bench", proxy.url).swap_ref("refs/campaigns/c", ours, None)
    finally:
        proxy.close()
    assert [status for _, status in proxy.puts] == [200, 412], proxy.puts
    now = direct.read_ref("refs/campaigns/c")
    assert now is not None and now.value == theirs


@pytest.mark.timeout(30)
def test_a_ref_swap_never_answered_but_applied_is_found_applied(aws_env: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that applies the ref's PUT and answers neither it nor botocore's retry in $CLAW_S3_READ_TIMEOUT: the
    swap fails (ReadTimeoutError), yet the remote holds the head. Before session 75 the push failed (exit 3), its
    tracking ref unwritten, and the next push after a build said "changed by another push: run claw pull" (nobody
    else had pushed). The ref read back holding the head, the push is this push's success."""
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    monkeypatch.setenv("CLAW_S3_READ_TIMEOUT", "0.5")
    store = Store(tmp_path / "a")
    direct = Remote("team", f"s3://{bucket}/bench", aws_env)
    head = _head(store, "campaigns/c", "first")
    proxy = LosingProxy(aws_env, stall=True)
    try:
        report = push.push(store, Remote("team", f"s3://{bucket}/bench", proxy.url))
    finally:
        proxy.close()
    assert [status for _, status in proxy.puts] == [200, 412], proxy.puts  # applied, then its retry refused
    assert report.refs_moved == ["campaigns/c"], report.summary()
    assert store.get_ref("remotes/team/campaigns/c") == head
    head = _head(store, "campaigns/c", "second")  # a build later: its push moves the ref on
    assert push.push(store, direct).refs_moved == ["campaigns/c"]
    assert pull.pull(Store(tmp_path / "probe"), direct).refs_moved == ["campaigns/c"]
    assert Store(tmp_path / "probe").get_ref("campaigns/c") == head


@pytest.mark.timeout(60)
def test_a_push_killed_after_the_server_applied_its_swap_is_no_other_push(aws_env: str, tmp_path: Path) -> None:
    """A real `claw push` SIGKILLed while its ref's PUT, applied, waits for its answer: the remote holds the head, the
    tracking ref was never written. Before session 75 the next push after a build stopped with "changed by another
    push: run claw pull, then push again" (nobody else had pushed), and the pull said "both sides changed it"."""
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    url = f"s3://{bucket}/bench"
    store = Store(tmp_path / "store")
    first = _head(store, "campaigns/c", "first")
    store.close()
    proxy = LosingProxy(aws_env, stall=True)
    env = {**os.environ, "CLAW_STORE": str(tmp_path / "store")}
    try:
        killed = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "push", url, "--endpoint-url", proxy.url,
                                   "--progress", "none"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not proxy.puts and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
        assert [status for _, status in proxy.puts] == [200], proxy.puts  # applied; its answer never reached the push
        proxy.stall, proxy.cut = False, ["-"]  # the same endpoint, answering again
        proxy.closing.set()
        store = Store(tmp_path / "store")
        assert store.list_refs("remotes/") == {}  # the tracking ref unwritten: the remote's head unknown to the store
        head = _head(store, "campaigns/c", "second")  # a build later
        store.close()
        again = subprocess.run([sys.executable, "-m", "clawstore.cli", "push", url, "--endpoint-url", proxy.url,
                                "--progress", "none"], cwd=tmp_path, env=env, capture_output=True, text=True)
    finally:
        proxy.close()
    assert again.returncode == 0 and "1 ref(s) moved" in again.stdout, again.stdout + again.stderr
    probe = Store(tmp_path / "probe")
    assert pull.pull(probe, Remote("team", url, aws_env)).refs_moved == ["campaigns/c"]
    assert probe.get_ref("campaigns/c") == head != first
