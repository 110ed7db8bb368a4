"""A kept-alive connection must never hand a request bytes of an earlier reply (providers/wire.py): a reply read as
another request's answer records a judgement or a run with content it was not given, paid and kept. Real servers on
127.0.0.1, each answer naming the request it answers."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from unittest import mock

import httpx
import pytest

from clawstore.providers import Endpoint, ProviderClient, ProviderError
from clawstore.providers.wire import RequestHead, Wire
from clawstore.testing.standin import StandIn, error, text
from tests.providers.test_wire import BODY, REPLY, _read_request, _reply, _Server
from tests.providers.test_wire_plain import ITEMS, TIMEOUT, URL, _ScriptedSocket, _wire
from tests.support.wire_paths import reply_paths


def _answer(content: str, *extra: bytes) -> bytes:
    reply = json.loads(json.dumps(REPLY))
    reply["choices"][0]["message"]["content"] = content
    return _reply(json.dumps(reply).encode(), *extra)


def _chunked(content: str, *extra: bytes) -> bytes:
    """A reply saying `content`, its body chunked; `extra` head lines."""
    body = json.dumps({**REPLY, "choices": [{"message": {"role": "assistant", "content": content},
                                             "finish_reason": "stop"}]}).encode()
    return (b"\r\n".join([b"HTTP/1.1 200 OK", b"Content-Type: application/json", b"Transfer-Encoding: chunked",
                           *extra, b"", b""]) + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))


def _requests(conn: socket.socket) -> Iterator[bytes]:
    """Each request's head read on `conn`, until the client closes or resets it."""
    try:
        while head := _read_request(conn):
            yield head
    except OSError:
        return


def _numbered(after: Callable[[socket.socket, int], None] = lambda conn, number: None,
              *extra: bytes) -> tuple[Callable[[socket.socket], None], list[int]]:
    """A server answering request n (counted over all connections) with content "answer n", then `after(conn, n)`."""
    count = [0]

    def answer(conn: socket.socket) -> None:
        for _ in _requests(conn):
            count[0] += 1
            conn.sendall(_answer(f"answer {count[0]}", *extra))
            after(conn, count[0])
    return answer, count


def _contents(answer: Callable[[socket.socket], None], requests: int = 3,
              pause: float = 0.0) -> tuple[list[str], int]:
    server = _Server(answer)
    try:
        with ProviderClient() as client:
            found = []
            for _ in range(requests):
                found.append(client.chat(server.endpoint, BODY, timeout=2, retries=0).message["content"])
                time.sleep(pause)
            assert client._clients[0].wire is not None  # through the wire, not httpx
    finally:
        server.close()
    return found, server.connections


@pytest.mark.parametrize("glued", [
    _answer("stale"),  # a whole second reply in the same write
    b"HTTP/1.1 200 OK\r\n",  # the start of one
    b"\r\n",  # a stray line end
])
def test_bytes_sent_with_a_reply_past_its_length_are_never_read_as_the_next_reply(glued: bytes) -> None:
    count = [0]

    def answer(conn: socket.socket) -> None:
        for _ in _requests(conn):
            count[0] += 1
            conn.sendall(_answer(f"answer {count[0]}") + glued)

    found, connections = _contents(answer)
    assert found == ["answer 1", "answer 2", "answer 3"]
    assert connections == 3  # none reused: what it held past the reply was no answer to the next request


def test_a_second_reply_glued_to_a_chunked_one_is_never_read_as_the_next_reply() -> None:
    count = [0]

    def answer(conn: socket.socket) -> None:
        for _ in _requests(conn):
            count[0] += 1
            conn.sendall(_chunked(f"answer {count[0]}") + _answer("stale"))

    found, connections = _contents(answer)
    assert found == ["answer 1", "answer 2", "answer 3"] and connections == 3


def test_bytes_sent_a_moment_after_a_reply_close_its_connection() -> None:
    def late(conn: socket.socket, number: int) -> None:
        time.sleep(0.05)
        conn.sendall(_answer("stale"))

    answer, _ = _numbered(late)
    found, connections = _contents(answer, pause=0.3)
    assert found == ["answer 1", "answer 2", "answer 3"] and connections == 3


@pytest.mark.parametrize("close", [b"Connection: close", b"CONNECTION: Keep-Alive, CLOSE",
                                   b"connection: foo,\tclose ", b"Connection: x\r\nConnection: close"])
def test_a_reply_saying_connection_close_in_any_spelling_ends_its_connection(close: bytes) -> None:
    answer, _ = _numbered(lambda conn, number: None, close)  # (the server keeps it open: the client must not)
    found, connections = _contents(answer)
    assert found == ["answer 1", "answer 2", "answer 3"] and connections == 3


def test_a_plain_reply_keeps_its_connection() -> None:
    answer, _ = _numbered()
    assert _contents(answer) == (["answer 1", "answer 2", "answer 3"], 1)


HEAD = RequestHead(URL.raw_path, list(ITEMS), len(ITEMS) - 1)
PLAIN = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n"


def _reconnects_to(wire: Wire, sock: _ScriptedSocket) -> None:
    """The wire's next connection is `sock` (its own `_connect` after the socket is made)."""
    connect = Wire._connect
    sock.settimeout = lambda seconds: None  # type: ignore[attr-defined]

    def to_sock(url: httpx.URL, timeout: float | None) -> None:
        with mock.patch("socket.create_connection", lambda *args, **kwargs: sock):
            connect(wire, url, timeout)
    wire._connect = to_sock  # type: ignore[method-assign]


def test_once_h11_has_the_connection_every_later_reply_is_its_until_the_connection_closes() -> None:
    wire, sock = _wire([PLAIN, CHUNKED, PLAIN, PLAIN], h11_only=False)
    taken: list[bool] = []
    for _ in range(4):
        wire.send(URL, HEAD, b"{}", TIMEOUT)
        taken.append(wire._plain is None)
        assert b"".join(wire.body(5.0)) in (b"{}", b"[]")
        wire.done()
    assert taken == [False, True, True, True] and wire._sock is sock
    wire.close()
    _reconnects_to(wire, _ScriptedSocket([PLAIN]))
    wire.send(URL, HEAD, b"{}", TIMEOUT)
    assert wire._plain is not None  # a new connection is read without h11 again
    wire.close()


@pytest.mark.parametrize("reply", [b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"a\": ", CHUNKED[:-7]])
@pytest.mark.parametrize("how", ["abandoned", "consumer raised", "timed out"])
def test_a_reply_not_read_to_its_end_closes_its_connection(reply: bytes, how: str) -> None:
    wire, _ = _wire([reply], h11_only=False)
    wire.send(URL, HEAD, b"{}", TIMEOUT)
    body = wire.body(5.0)
    try:
        next(body)
        if how == "consumer raised":
            raise ValueError("the consumer failed")
        if how == "timed out":
            with pytest.raises(httpx.ReadTimeout):
                next(body)
    except ValueError:
        pass
    finally:
        wire.done()
    assert wire._sock is None and wire._plain is None


@pytest.mark.parametrize("reads", [[b"HTTP/1.1 200 OK\r\nContent-Le"], [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2"]])
def test_a_timeout_mid_head_closes_the_connection_and_the_next_starts_clean(reads: list[bytes]) -> None:
    wire, _ = _wire(reads, h11_only=False)
    with pytest.raises(httpx.ReadTimeout):
        wire.send(URL, HEAD, b"{}", TIMEOUT)
    assert wire._sock is None
    _reconnects_to(wire, _ScriptedSocket([PLAIN]))
    assert wire.send(URL, HEAD, b"{}", TIMEOUT)[0] == 200 and b"".join(wire.body(5.0)) == b"{}"
    wire.close()


def test_an_idle_connection_that_received_bytes_is_not_used_again() -> None:
    wire, idle = _wire([PLAIN], h11_only=False)
    wire.send(URL, HEAD, b"{}", TIMEOUT)
    assert b"".join(wire.body(5.0)) == b"{}"
    wire.done()
    readable, writer = socket.socketpair()
    idle.fileno = readable.fileno  # type: ignore[method-assign]
    writer.sendall(b"HTTP/1.1 200 OK\r\n")  # arrived while the connection sat idle
    idle.reads = [_answer("stale")]
    _reconnects_to(wire, _ScriptedSocket([PLAIN]))
    assert wire.send(URL, HEAD, b"{}", TIMEOUT)[0] == 200 and b"".join(wire.body(5.0)) == b"{}"
    assert wire._sock is not idle
    wire.close()
    readable.close()
    writer.close()


def test_the_stand_ins_answers_each_take_their_path(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = reply_paths(monkeypatch)
    standin.script("m1", error(429, "slow down", retry_after=0.2), error(503, "busy"), text("at last"))
    with ProviderClient(backoff_base=0.01, backoff_cap=0.02) as client:
        started = time.monotonic()
        result = client.chat(Endpoint(standin.base_url, None), BODY, timeout=5, retries=2)
        assert time.monotonic() - started >= 0.2  # the Retry-After was honoured
        assert client._clients[0].wire is not None
    assert result.message["content"] == "at last" and result.attempts == 3
    assert [entry.get("status_code") for entry in result.attempt_log] == [429, 503]
    assert taken == ["plain", "plain", "plain"]


@pytest.mark.parametrize(("reply", "path"), [
    (_reply(gzip.compress(json.dumps(REPLY).encode(), mtime=0), b"Content-Encoding: gzip"), ["plain"]),
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
     + b"%x\r\n%s\r\n0\r\n\r\n" % (len(json.dumps(REPLY).encode()), json.dumps(REPLY).encode()), ["h11"]),
    (b"HTTP/1.1 100 Continue\r\n\r\n" + _reply(json.dumps(REPLY).encode()), ["h11"]),
    (b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + json.dumps(REPLY).encode(), ["h11"]),
], ids=["gzip", "chunked", "100 continue", "http/1.0"])
def test_gzip_chunked_and_other_replies_each_take_their_path(reply: bytes, path: list[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    taken = reply_paths(monkeypatch)

    def answer(conn: socket.socket) -> None:
        for _ in _requests(conn):
            conn.sendall(reply)
            if reply.startswith(b"HTTP/1.0"):
                return  # (its body ends at the close)

    assert _contents(answer, requests=1)[0] == ["héllo"]
    assert taken == path


def test_a_head_dripped_a_byte_at_a_time_is_cut_off_at_the_exchanges_deadline() -> None:
    # The deadline bounds the whole exchange (ProviderClient._attempt), the head too: a server that drips its head
    # holds no worker for hours (each read is under the read timeout, so only the deadline can end it).
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        for _ in _requests(conn):
            for byte in _answer("slow").replace(b"\r\n", b"\r\nX-Pad: " + b"p" * 40 + b"\r\n", 1):
                if stop.wait(0.02):
                    return
                conn.sendall(bytes([byte]))

    server = _Server(drip)
    try:
        with ProviderClient() as client:
            started = time.monotonic()
            with pytest.raises(ProviderError) as raised:
                client.chat(server.endpoint, BODY, timeout=0.5, retries=0)
            elapsed = time.monotonic() - started
            assert client._clients[0].wire is not None
    finally:
        stop.set()
        server.close()
    assert raised.value.timed_out and elapsed < 1.5  # (its head alone takes ~2 s to drip)
