"""The wire reads a reply of the common shape without h11 (providers/wire.py `_plain_head`): every reply, however it
is cut into reads, must come to what h11 alone makes of it — the same status, reason, headers and body, the same
error and text, the same connection kept or dropped — and every request must go out as the bytes h11 writes."""

from __future__ import annotations

import os
import random
from typing import Any

import h11
import httpx
import pytest

from clawstore.providers.wire import MAX_INCOMPLETE_EVENT_SIZE, RequestHead, Wire

URL = httpx.URL("http://127.0.0.1:9/v1/chat/completions")
TIMEOUT = httpx.Timeout(5.0)
ITEMS = [(b"Host", b"127.0.0.1:9"), (b"Accept", b"*/*"), (b"Accept-Encoding", b"gzip, deflate"),
         (b"Connection", b"keep-alive"), (b"User-Agent", b"python-httpx/0.28.1"),
         (b"Content-Type", b"application/json"), (b"X-Title", b"clawstore"),
         (b"Authorization", b"Bearer sk-test-0123456789"), (b"Content-Length", b"0")]


class _ScriptedSocket:
    """What the wire uses of a socket: the reply handed out in the given reads, then a timeout (a server waiting)."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = list(reads)
        self.sent = b""
        self._idle, self._never = os.pipe()  # (a descriptor poll() finds nothing to read on: an idle connection)
        self._fds_open = True

    def fileno(self) -> int:
        return self._idle

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def recv(self, size: int) -> bytes:
        if not self.reads:
            raise TimeoutError("timed out")
        data = self.reads.pop(0)
        if len(data) > size:
            self.reads.insert(0, data[size:])
            data = data[:size]
        return data

    def setsockopt(self, *args: Any) -> None:
        pass

    def close(self) -> None:
        fds, self._fds_open = (self._idle, self._never) if self._fds_open else (), False  # (once: a number reused)
        for fd in fds:
            os.close(fd)


def _wire(reads: list[bytes], h11_only: bool) -> tuple[Wire, _ScriptedSocket]:
    wire = Wire(lambda: None)  # type: ignore[arg-type, return-value]
    sock = _ScriptedSocket(reads)
    wire._sock, wire._origin, wire._expire_at = sock, (URL.scheme, URL.raw_host, URL.port), float("inf")  # type: ignore
    if h11_only:  # the wire before the plain reading: h11 from the start
        wire._conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_INCOMPLETE_EVENT_SIZE)
    return wire, sock


def _exchanges(reads: list[bytes], h11_only: bool, requests: int = 2) -> list[Any]:
    """What each of `requests` exchanges on one connection comes to, and what went out."""
    wire, sock = _wire(reads, h11_only)
    head = RequestHead(URL.raw_path, list(ITEMS), len(ITEMS) - 1)
    found: list[Any] = []
    for number in range(requests):
        if wire._sock is None:
            break
        try:
            status, reason, headers = wire.send(URL, head, b'{"n": %d}' % number, TIMEOUT)
            body = b"".join(wire.body(5.0))
            outcome: Any = (status, reason, [(bytes(n), bytes(v)) for n, v in headers], body)
        except httpx.HTTPError as exc:
            outcome = (type(exc).__name__, str(exc))
        wire.done()
        found.append((outcome, wire._sock is not None))
    wire.close()
    sock.close()  # (its pipe: thousands of exchanges in one test exhausted a worker's descriptors)
    return [found, sock.sent]


def _reply(body: bytes = b'{"ok": true}', *headers: bytes, status: bytes = b"200 OK",
           version: bytes = b"HTTP/1.1") -> bytes:
    lines = [version + b" " + status, *headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


CL = b"Content-Length: %d"
SHAPES: dict[str, bytes] = {
    "plain": _reply(b'{"ok": true}', b"Content-Type: application/json", CL % 12, b"x-request-id: req-1"),
    "plain, no reason": _reply(b"{}", CL % 2, status=b"200"),
    "plain, an empty reason": _reply(b"{}", CL % 2, status=b"200 "),
    "empty body": _reply(b"", CL % 0),
    "spaces around a value": _reply(b"{}", b"Content-Length:   2  ", b"X-A:\tb c\t"),
    "an empty value": _reply(b"{}", b"X-Empty:", CL % 2),
    "obs-text and controls in a value": _reply(b"{}", b"X-A: caf\xe9 \x01\x7f", CL % 2),
    "Connection: close": _reply(b"{}", CL % 2, b"Connection: keep-alive, Close"),
    "503 with Retry-After": _reply(b"busy", b"Retry-After: 0", CL % 4, status=b"503 Busy"),
    "HTTP/1.0": _reply(b"{}", CL % 2, version=b"HTTP/1.0"),
    "HTTP/2.0 in the status line": _reply(b"{}", CL % 2, version=b"HTTP/2.0"),
    "no Content-Length (to the close)": _reply(b"{}"),
    "two equal Content-Lengths": _reply(b"{}", CL % 2, CL % 2),
    "two unequal Content-Lengths": _reply(b"{}", CL % 2, CL % 3),
    "a Content-Length list": _reply(b"{}", b"Content-Length: 2, 2"),
    "a Content-Length not a number": _reply(b"{}", b"Content-Length: two"),
    "a Content-Length of 21 digits": _reply(b"{}", b"Content-Length: 000000000000000000002"),
    "chunked": _reply(b"2\r\n{}\r\n0\r\n\r\n", b"Transfer-Encoding: chunked"),
    "gzip transfer coding": _reply(b"{}", b"Transfer-Encoding: gzip"),
    "chunked beside a Content-Length": _reply(b"2\r\n{}\r\n0\r\n\r\n", CL % 15, b"Transfer-Encoding: chunked"),
    "gzip transfer coding beside a Content-Length": _reply(b"{}", CL % 2, b"Transfer-Encoding: gzip"),
    "204": _reply(b"", CL % 5, status=b"204 No Content"),
    "304": _reply(b"", status=b"304 Not Modified"),
    "100 Continue first": b"HTTP/1.1 100 Continue\r\n\r\n" + _reply(b"{}", CL % 2),
    "101": b"HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n",
    "a folded header": _reply(b"{}", b"X-A: one", b"  two", CL % 2),
    "bare newlines": b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
    "a bare newline inside": b"HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 2\r\n\r\n{}",
    "a blank line first": b"\r\n" + _reply(b"{}", CL % 2),
    "a bare newline first": b"\n" + _reply(b"{}", CL % 2),
    "a space first": b" " + _reply(b"{}", CL % 2),
    "a header name with a space": _reply(b"{}", b"X A: 1", CL % 2),
    "a header with no colon": _reply(b"{}", b"X-A", CL % 2),
    "not HTTP": b"HELLO THERE\r\n\r\n",
    "a status of two digits": _reply(b"{}", CL % 2, status=b"20 OK"),
    "more than its length": _reply(b"{}extra", CL % 2),
    "less than its length, then closed": _reply(b"{}", CL % 9),
    "a head over the limit": _reply(b"{}", b"X-Big: " + b"a" * (MAX_INCOMPLETE_EVENT_SIZE + 10), CL % 2),
    "nothing": b"",
    "only a blank line": b"\r\n",
    "only a space": b" ",
    "an unfinished head": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
}


def _cuts(data: bytes, rng: random.Random) -> list[list[bytes]]:
    """`data` read whole, a byte at a time, and cut at a few random places."""
    ways = [[data], [data[i:i + 1] for i in range(len(data))] if len(data) < 400 else [data]]
    for _ in range(6):
        points = sorted(rng.sample(range(1, len(data)), min(3, max(len(data) - 1, 0)))) if len(data) > 1 else []
        ways.append([data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)])
    return ways


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_reply_comes_to_what_h11_makes_of_it_however_it_is_read(shape: str) -> None:
    rng = random.Random(shape)
    reply = SHAPES[shape]
    for then in (b"", _reply(b"[]", CL % 2)):  # alone (then silence or the close), and followed by a second reply
        for reads in _cuts(reply + then, rng):
            for closed in (False, True):
                script = reads + ([b""] if closed else [])
                assert _exchanges(script, h11_only=False) == _exchanges(script, h11_only=True), (shape, reads, closed)


def test_random_heads_come_to_what_h11_makes_of_them() -> None:
    rng = random.Random(62)
    pieces = [b"HTTP/1.1 ", b"HTTP/1.0 ", b"200", b"404", b"101", b"204", b" OK", b"\r\n", b"\n", b"\r", b" ", b"\t",
              b"Content-Length: 2", b"Content-Length: 5", b"content-length:2", b"Transfer-Encoding: chunked",
              b"Connection: close", b"X-A: b", b"X-A:", b":", b"\x00", b"\xff", b"{}", b"2\r\n{}\r\n0\r\n\r\n"]
    for _ in range(1500):
        reply = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.7:
            reply = _reply(b"{}", CL % 2) if rng.random() < 0.3 else b"HTTP/1.1 200 OK\r\n" + reply
        for reads in _cuts(reply, rng)[:3]:
            script = reads + ([b""] if rng.random() < 0.5 else [])
            assert _exchanges(script, h11_only=False) == _exchanges(script, h11_only=True), (reply, reads)


def test_a_plain_reply_is_read_without_h11_and_its_connection_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_h11(*args: object) -> None:
        raise AssertionError("read by h11")

    monkeypatch.setattr(h11.Connection, "next_event", no_h11)
    monkeypatch.setattr(h11.Connection, "receive_data", no_h11)
    found, _ = _exchanges([SHAPES["plain"], SHAPES["plain, no reason"]], h11_only=False)
    assert found == [((200, "OK", [(b"Content-Type", b"application/json"), (b"Content-Length", b"12"),
                                   (b"x-request-id", b"req-1")], b'{"ok": true}'), True),
                     ((200, "", [(b"Content-Length", b"2")], b"{}"), True)]


def test_a_body_read_without_h11_is_not_held_beside_the_reply() -> None:
    wire, _ = _wire([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", *[b"0123456789"] * 10], h11_only=False)
    wire.send(URL, RequestHead(URL.raw_path, list(ITEMS), len(ITEMS) - 1), b"{}", TIMEOUT)
    for _ in wire.body(5.0):
        assert wire._plain is not None and wire._plain.chunks == [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"]
    wire.done()
    assert wire._sock is not None  # (read whole: kept for the next request)
    wire.close()


@pytest.mark.parametrize("length", [0, 1, 9, 10, 99, 100, 65_537])
def test_a_request_goes_out_as_the_bytes_h11_writes(length: int) -> None:
    payload = bytes(random.Random(length).getrandbits(8) for _ in range(length))
    head = RequestHead(URL.raw_path, list(ITEMS), len(ITEMS) - 1)
    conn = h11.Connection(h11.CLIENT)
    written = b"".join((conn.send(h11.Request(method=b"POST", target=URL.raw_path, headers=head.items(length))) or b"",
                        conn.send(h11.Data(data=payload)) or b"", conn.send(h11.EndOfMessage()) or b""))
    assert head.encode(payload) == written
    assert b"Content-Length: %d\r\n" % length in written


def test_a_header_h11_refuses_is_refused_with_h11s_text() -> None:
    items = [*ITEMS[:-2], (b"Authorization", b"Bearer one\nline-two"), ITEMS[-1]]
    head = RequestHead(URL.raw_path, items, len(items) - 1)
    with pytest.raises(h11.LocalProtocolError) as plain:
        head.encode(b"{}")
    with pytest.raises(h11.LocalProtocolError) as through_h11:
        h11.Connection(h11.CLIENT).send(h11.Request(method=b"POST", target=URL.raw_path, headers=head.items(2)))
    assert str(plain.value) == str(through_h11.value)
