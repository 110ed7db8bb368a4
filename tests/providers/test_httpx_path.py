"""The path through httpx (a proxy in the environment, or a client holding a reply's cookie) keeps the wire's two
guarantees (tests/providers/test_wire_reuse.py): bytes past a reply's end are never read as the next request's reply,
and the exchange's deadline bounds a reply's head too. Real servers on 127.0.0.1; the proxy is a real one that pipes
each connection's bytes to the server and back, so what the server sends reaches the client as it would directly."""

from __future__ import annotations

import concurrent.futures
import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import httpx
import pytest

from clawstore.providers import Endpoint, ProviderClient, ProviderError
from clawstore.providers import httpx_path as httpx_path_module
from tests.providers.test_wire import BODY, _self_signed, _Server
from tests.providers.test_wire_reuse import _answer, _chunked, _requests
from tests.support.sockets import stop_listening

COOKIE = b"Set-Cookie: session=abc; Path=/"


class _PipeProxy:
    """An HTTP proxy on 127.0.0.1 that pipes each connection to `port` and back, byte for byte as they come (after
    answering a CONNECT: an https request's tunnel)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._open, args=(client,), daemon=True).start()

    def _open(self, client: socket.socket) -> None:
        first = client.recv(65536)  # (a CONNECT's head comes whole on loopback)
        try:
            server = socket.create_connection(("127.0.0.1", self.port))
        except OSError:  # (the server's test is over: its listener is shut)
            client.close()
            return
        if first.startswith(b"CONNECT "):
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            server.sendall(first)
        for source, sink in ((client, server), (server, client)):
            threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def close(self) -> None:
        stop_listening(self.listener)


@pytest.fixture(params=["proxy", "cookie"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How requests come to go through httpx: a proxy named in the environment, or a cookie the first reply sets
    (that first request goes through the wire)."""
    _no_proxy(monkeypatch)
    return str(request.param)


def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy named in the environment the test runs in, and none excluded."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@contextlib.contextmanager
def _through_httpx(path: str, answer: Callable[[socket.socket], None], monkeypatch: pytest.MonkeyPatch,
                   scheme: str = "http") -> Iterator[tuple[ProviderClient, Endpoint, _Server]]:
    """A client and the endpoint of a server answering with `answer`, reached along `path`; checks afterwards that
    its requests went through httpx (on the cookie path, each reply of `answer` sets one)."""
    server = _Server(answer)
    proxy = _PipeProxy(server.listener.getsockname()[1]) if path == "proxy" else None
    if proxy is not None:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    endpoint = Endpoint(f"{scheme}://localhost:{server.listener.getsockname()[1]}/v1", None)
    try:
        with ProviderClient() as client:
            yield client, endpoint, server
            leased = client._clients[0]
            assert leased.wire is None if path == "proxy" else leased.cookies
    finally:
        server.close()
        if proxy is not None:
            proxy.close()


def _contents(path: str, answer: Callable[[socket.socket], None], monkeypatch: pytest.MonkeyPatch,
              requests: int = 4) -> tuple[list[str], int]:
    with _through_httpx(path, answer, monkeypatch) as (client, endpoint, server):
        found = [client.chat(endpoint, BODY, timeout=2, retries=0).message["content"] for _ in range(requests)]
    return found, server.connections


def _numbered(glued: bytes = b"") -> Callable[[socket.socket], None]:
    """A server answering request n (counted over all connections) with "answer n" and a cookie, then `glued`."""
    count = [0]

    def answer(conn: socket.socket) -> None:
        for _ in _requests(conn):
            count[0] += 1
            conn.sendall(_answer(f"answer {count[0]}", COOKIE) + glued)
    return answer


@pytest.mark.parametrize("glued", [_answer("stale", COOKIE), b"HTTP/1.1 200 OK\r\n", b"\r\n"])
def test_bytes_sent_with_a_reply_past_its_length_are_never_read_as_the_next_reply(
        path: str, glued: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    found, connections = _contents(path, _numbered(glued), monkeypatch)
    assert found == ["answer 1", "answer 2", "answer 3", "answer 4"]
    assert connections == 4  # none reused: what it held past the reply was no answer to the next request


def test_a_second_reply_glued_to_a_chunked_one_is_never_read_as_the_next_reply(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    count = [0]

    def answer(conn: socket.socket) -> None:
        for _ in _requests(conn):
            count[0] += 1
            conn.sendall(_chunked(f"answer {count[0]}", COOKIE) + _answer("stale", COOKIE))

    found, connections = _contents(path, answer, monkeypatch)
    assert found == ["answer 1", "answer 2", "answer 3", "answer 4"] and connections == 4


def test_a_plain_reply_keeps_its_connection(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    found, connections = _contents(path, _numbered(), monkeypatch)
    assert found == ["answer 1", "answer 2", "answer 3", "answer 4"]
    assert connections == {"proxy": 1, "cookie": 2}[path]  # (the cookie's: the wire's first, then httpx's)


def test_where_httpxs_insides_changed_no_connection_is_kept(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The reply's h11 connection is found through httpx's and httpcore's private attributes: when they are not
    # there, nothing left on a connection can be seen, so none is used again.
    monkeypatch.setattr(httpx_path_module, "h11_connection", lambda reply: None)
    for glued in (b"", _answer("stale", COOKIE)):
        found, connections = _contents(path, _numbered(glued), monkeypatch)
        assert found == ["answer 1", "answer 2", "answer 3", "answer 4"] and connections == 4


@pytest.mark.parametrize(("version", "kept"), [(b"HTTP/2", True), (b"HTTP/1.1", False)])
def test_an_http2_replys_connection_is_left_to_httpcore(version: bytes, kept: bool) -> None:
    # HTTP/2 frames each reply (no h11 connection to look at): its connection is not cut for want of one.
    left, right = socket.socketpair()

    class Stream:
        def get_extra_info(self, name: str) -> object:
            return left if name == "socket" else None

    httpx_path_module.close_reply(httpx.Response(200, extensions={"http_version": version, "network_stream": Stream()}))
    try:
        with contextlib.suppress(BrokenPipeError):
            left.sendall(b"x")
        assert (right.recv(1) == b"x") == kept  # (a shut-down socket sends nothing more: the peer reads its end)
    finally:
        left.close()
        right.close()


def _dripped_at(number: int | None, stop: threading.Event, wrap: Callable[[socket.socket], Any] = lambda conn: conn,
                glued: bytes = b"") -> Callable[[socket.socket], None]:
    """A server whose answer `number` (counted over all connections; None: every answer) drips a byte every 20 ms,
    head first; each other answer is sent whole, `glued` after it."""
    count = [0]

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), wrap(conn) as sock:
            for _ in _requests(sock):
                count[0] += 1
                reply = _answer(f"answer {count[0]}", COOKIE)
                if number is not None and count[0] != number:
                    sock.sendall(reply + glued)
                    continue
                for byte in reply.replace(b"\r\n", b"\r\nX-Pad: " + b"p" * 40 + b"\r\n", 1):
                    if stop.wait(0.02):
                        return
                    sock.sendall(bytes([byte]))
    return answer


def _dripped_reply_times_out(client: ProviderClient, endpoint: Endpoint, number: int) -> float:
    """Seconds the dripped request `number` took to fail as timed out; the client answers the next one."""
    for _ in range(number - 1):
        client.chat(endpoint, BODY, timeout=2, retries=0)
    started = time.monotonic()
    with pytest.raises(ProviderError) as raised:
        client.chat(endpoint, BODY, timeout=0.5, retries=0)
    elapsed = time.monotonic() - started
    assert raised.value.timed_out and raised.value.code == "timeout"
    assert client.chat(endpoint, BODY, timeout=2, retries=0).message["content"] == f"answer {number + 1}"
    return elapsed


def test_a_head_dripped_a_byte_at_a_time_is_cut_off_at_the_exchanges_deadline(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx's timeouts are per read: only the exchange's deadline ends a head each of whose bytes comes in time.
    number = {"proxy": 1, "cookie": 2}[path]  # (the cookie's first request goes through the wire)
    stop = threading.Event()
    try:
        with _through_httpx(path, _dripped_at(number, stop), monkeypatch) as (client, endpoint, _):
            elapsed = _dripped_reply_times_out(client, endpoint, number)
    finally:
        stop.set()
    assert elapsed < 1.5  # (its head alone takes ~4 s to drip)


def _tls(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[socket.socket], ssl.SSLSocket]:
    """The server's side of TLS with a certificate for localhost the client trusts (SSL_CERT_FILE)."""
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return lambda conn: context.wrap_socket(conn, server_side=True)


def test_over_tls_a_dripped_head_is_cut_off_at_the_exchanges_deadline(path: str, tmp_path: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A provider over https that set a cookie, or reached through a proxy's tunnel: the watchdog cuts a TLS
    # connection as it does a plain one.
    number = {"proxy": 1, "cookie": 2}[path]
    stop = threading.Event()
    try:
        with _through_httpx(path, _dripped_at(number, stop, _tls(tmp_path, monkeypatch)), monkeypatch,
                            scheme="https") as (client, endpoint, _):
            elapsed = _dripped_reply_times_out(client, endpoint, number)
    finally:
        stop.set()
    assert elapsed < 1.5


def test_over_tls_bytes_past_a_reply_are_never_read_as_the_next_reply(path: str, tmp_path: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    answer = _dripped_at(0, stop, _tls(tmp_path, monkeypatch), glued=_answer("stale", COOKIE))
    with _through_httpx(path, answer, monkeypatch, scheme="https") as (client, endpoint, server):
        found = [client.chat(endpoint, BODY, timeout=2, retries=0).message["content"] for _ in range(4)]
    assert found == ["answer 1", "answer 2", "answer 3", "answer 4"] and server.connections == 4


def test_a_connection_opened_after_the_deadline_is_cut_as_it_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    # The watchdog fires while the connection is still being made (a slow connect, stood in for by a pause before
    # httpcore's): the connection it could not cut then is cut once it opens, or the dripped head runs on.
    connect = httpcore.SyncBackend.connect_tcp

    def slow_connect(self: httpcore.SyncBackend, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        time.sleep(0.7)
        return connect(self, *args, **kwargs)

    _no_proxy(monkeypatch)
    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", slow_connect)
    stop = threading.Event()
    try:
        with _through_httpx("proxy", _dripped_at(None, stop), monkeypatch) as (client, endpoint, _):
            started = time.monotonic()
            with pytest.raises(ProviderError) as raised:
                client.chat(endpoint, BODY, timeout=0.5, retries=0)
            elapsed = time.monotonic() - started
    finally:
        stop.set()
    assert raised.value.timed_out and elapsed < 1.5


def test_an_earlier_deadline_armed_while_the_watchdog_waits_for_a_later_one_is_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # One watchdog serves a client's exchanges in flight: it sleeps until the earliest deadline, so one armed earlier
    # than that must wake it (or the 0.5 s exchange would run to the slow one's 3 s).
    count, stop, slow_in = [0], threading.Event(), threading.Event()

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            for _ in _requests(conn):
                count[0] += 1
                reply = _answer(f"answer {count[0]}", COOKIE)
                if count[0] == 1:  # the slow one: answered whole after a second
                    slow_in.set()
                    stop.wait(1.0)
                    conn.sendall(reply)
                    continue
                for byte in reply:
                    if stop.wait(0.02):
                        return
                    conn.sendall(bytes([byte]))

    _no_proxy(monkeypatch)
    slow: list[str] = []
    try:
        with _through_httpx("proxy", answer, monkeypatch) as (client, endpoint, _):
            first = threading.Thread(target=lambda: slow.append(
                client.chat(endpoint, BODY, timeout=3, retries=0).message["content"]))
            first.start()
            # (the slow one's request is in, so its deadline is armed: a fixed pause let the fast one come first
            # on a loaded machine, and it was then the one answered slowly)
            assert slow_in.wait(10)
            started = time.monotonic()
            with pytest.raises(ProviderError) as raised:
                client.chat(endpoint, BODY, timeout=0.5, retries=0)
            elapsed = time.monotonic() - started
            first.join()
    finally:
        stop.set()
    assert raised.value.timed_out and elapsed < 1.5
    assert slow == ["answer 1"]


def test_a_body_read_until_the_connection_closes_cut_at_the_deadline_is_a_timeout_not_a_reply(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reply with no length ends when its connection closes: the watchdog's cut ends it just so. Its body as far as
    # it came is no reply (here: a malformed one, not retried), and the exchange's deadline passed: a timeout.
    number = {"proxy": 1, "cookie": 2}[path]  # (the cookie's first request goes through the wire)
    count, stop = [0], threading.Event()

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            for _ in _requests(conn):
                count[0] += 1
                reply = _answer(f"answer {count[0]}", COOKIE)
                if count[0] != number:
                    conn.sendall(reply)
                    continue
                head, body = reply.split(b"\r\n\r\n", 1)
                head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.lower().startswith(
                    b"content-length")) + b"\r\nConnection: close\r\n\r\n"
                conn.sendall(head)
                for byte in body:
                    if stop.wait(0.02):
                        return
                    conn.sendall(bytes([byte]))
                return

    try:
        with _through_httpx(path, answer, monkeypatch) as (client, endpoint, _):
            elapsed = _dripped_reply_times_out(client, endpoint, number)
    finally:
        stop.set()
    assert elapsed < 1.5


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_connection_cut_while_idle_in_the_pool_is_not_used_for_the_next_request(
        path: str, scheme: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The watchdog may cut a connection httpcore has just taken back (a reply read whole as its deadline passed), and
    # close_reply cuts one that held bytes past a reply: the next request must open a new connection, not fail on the
    # cut one (a write or read error after the request may have left: "sent, answer lost", unknown cost, retried).
    wrap = _tls(tmp_path, monkeypatch) if scheme == "https" else (lambda conn: conn)
    stop = threading.Event()
    with _through_httpx(path, _dripped_at(0, stop, wrap), monkeypatch, scheme=scheme) as (client, endpoint, server):
        first = 1 if path == "proxy" else 2  # (the cookie's first request goes through the wire)
        for _ in range(first):
            client.chat(endpoint, BODY, timeout=2, retries=0)
        streams = client._clients[0].streams
        assert streams is not None and streams._streams
        streams.cut_all()
        result = client.chat(endpoint, BODY, timeout=2, retries=0)
        assert result.message["content"] == f"answer {first + 1}" and result.attempts == 1
        assert not result.usage.nothing_sent and result.usage.rejected is None
    assert server.connections == first + 1


def test_a_given_transports_client_shared_by_threads_never_reads_bytes_past_a_reply_as_anothers_reply() -> None:
    # A given transport's client is one pool shared by the threads: httpx hands a read reply's connection back to it
    # before close_reply can look, and another thread's request may take it at once (and read what it held past the
    # reply as its own), or have it cut under it. The check must be made before the connection is handed back.
    count = [0]

    def answer(conn: socket.socket) -> None:
        for _ in _requests(conn):
            count[0] += 1
            conn.sendall(_answer(f"answer {count[0]}") + _answer("stale"))

    server = _Server(answer)
    try:
        with ProviderClient(transport=httpx.HTTPTransport()) as client:
            def one(_: int) -> str:
                try:
                    return str(client.chat(server.endpoint, BODY, timeout=5, retries=0).message["content"])
                except ProviderError as exc:
                    return f"failed: {exc}"

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                found = list(pool.map(one, range(400)))
    finally:
        server.close()
    assert [content for content in found if not content.startswith("answer ")] == []
    assert server.connections == 400


def test_where_httpxs_insides_changed_a_given_transports_client_keeps_no_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpx_path_module, "h11_connection", lambda reply: None)
    for glued in (b"", _answer("stale")):
        server = _Server(_numbered(glued))
        try:
            with ProviderClient(transport=httpx.HTTPTransport()) as client:
                found = [client.chat(server.endpoint, BODY, timeout=2, retries=0).message["content"] for _ in range(4)]
        finally:
            server.close()
        assert found == ["answer 1", "answer 2", "answer 3", "answer 4"] and server.connections == 4
