"""An S3 endpoint nobody answers at (a mistyped port, a server not started) is said at once: push, pull and
`build --remote` waited ~12–37 s of boto3's retries before "cannot connect". One that has answered is still retried
when it refuses a connection later (a server restarting mid-campaign must not fail it)."""

from __future__ import annotations

import secrets
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

from clawstore.remote import backends
from clawstore.remote.backends import RemoteError, S3Backend
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.blinking import BlinkingProxy
from tests.support.s3server import FAKE_CREDENTIALS, make_bucket
from tests.support.sockets import closed_port
from tests.support.workspace import Workspace


def test_push_pull_and_build_remote_say_at_once_that_the_endpoint_cannot_be_reached(
        provider: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    ws = Workspace(tmp_path / "a")
    ws.case("alpha")
    ws.suite("main", ["m1"])
    ws.run_profile()
    endpoint = f"http://127.0.0.1:{closed_port()}"
    assert claw("remote", "add", "team", "s3://nowhere/x", "--endpoint-url", endpoint, cwd=ws.root).returncode == 0
    for command in (("build", "--suite", "main", "--run-profile", "rp", "--remote", "team"), ("push", "team"),
                    ("pull", "team")):
        started = time.monotonic()
        done = claw(*command, cwd=ws.root)
        elapsed = time.monotonic() - started
        assert done.returncode == 3 and "cannot connect to the endpoint" in done.stderr, (command, done.stderr)
        assert "Traceback" not in done.stderr
        assert elapsed < 5, (command, elapsed)  # (each took 12–37 s before)
    assert provider.requests == []


def _attempts(backend: S3Backend, proxy: BlinkingProxy) -> list[type[Exception] | None]:
    """What each request's attempts met (None: an answer), in order; a refused connection brings the proxy back before
    botocore decides whether to retry, so the retry, if there is one, is answered."""
    met: list[type[Exception] | None] = []

    def seen(caught_exception: Exception | None, **_: Any) -> None:
        met.append(None if caught_exception is None else type(caught_exception))
        if isinstance(caught_exception, EndpointConnectionError):
            proxy.back()

    backend.client.meta.events.register_last("needs-retry.s3", seen)
    return met


def _refused_then_answered(met: list[type[Exception] | None]) -> bool:
    # (a request sent on the pooled connection before its closing was seen meets a dropped one first: retried as ever)
    return EndpointConnectionError in met and met[met.index(EndpointConnectionError) + 1:] == [None]


def test_a_connection_refused_after_the_endpoint_answered_is_retried(aws_env: str, tmp_path: Path) -> None:
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    source = tmp_path / "pack"
    source.write_bytes(secrets.token_bytes(5000))
    with BlinkingProxy(aws_env) as proxy:
        first = S3Backend(bucket, "bench", proxy.url)
        first.upload(source, "packs/a.pack")  # the endpoint answers
        met = _attempts(first, proxy)
        proxy.out()  # (its pooled connection closed: the next request connects anew, and is refused)
        first.download("packs/a.pack", tmp_path / "got", size=5000)
        assert (tmp_path / "got").read_bytes() == source.read_bytes()
        assert _refused_then_answered(met)

        # A backend made later in the same process (a build's interim and last pushes each make one) is retried too:
        # the endpoint answered this process already.
        later = S3Backend(bucket, "bench", proxy.url)
        met = _attempts(later, proxy)
        proxy.out()
        assert later.list("packs/") == {"packs/a.pack": 5000}
        assert _refused_then_answered(met)


def test_an_endpoint_that_never_answered_is_not_retried(aws_env: str, tmp_path: Path) -> None:
    with BlinkingProxy(aws_env) as proxy:
        proxy.out()
        _said_in_one_attempt(proxy.url, "cannot connect to the endpoint", EndpointConnectionError, within=2)


def _said_in_one_attempt(endpoint: str, message: str, met_once: type[Exception], within: float) -> None:
    """A listing of a remote at `endpoint` fails with `message` within `within` s, after one attempt that met
    `met_once`."""
    backend = S3Backend("nowhere", "x", endpoint)
    met: list[type[Exception] | None] = []
    backend.client.meta.events.register_last("needs-retry.s3", lambda caught_exception, **_:
                                             met.append(type(caught_exception)))
    started = time.monotonic()
    with pytest.raises(RemoteError, match=message):
        backend.list("refs/")
    assert time.monotonic() - started < within
    assert met == [met_once]  # one attempt


def _black_hole() -> tuple[socket.socket, list[socket.socket]]:
    """A port whose connections are never completed: a listener that accepts nothing, its queue filled, so the
    kernel drops every further connection's SYN (a firewall that drops packets looks the same from outside)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(4):  # (Linux queues backlog + 1; the connects past it would block: made non-blocking)
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    return listener, fillers


def test_an_endpoint_that_never_completes_a_connection_is_said_after_one_connect_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "CONNECT_TIMEOUT_S", 1)  # (15 s in use: too long for a test)
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    listener, fillers = _black_hole()
    try:
        # (6 attempts of botocore's 60 s each before: 6 minutes)
        _said_in_one_attempt(f"http://127.0.0.1:{listener.getsockname()[1]}", "did not complete a connection",
                             ConnectTimeoutError, within=3)
    finally:
        for sock in (listener, *fillers):
            sock.close()
