"""One kept-alive HTTP/1.1 connection spoken with h11 over a plain socket: a provider request without httpx's and
httpcore's layers (issue 54, a lean request path; docs/runners.md "Details by module", docs/scale/building.md
"Session 47: the worker side").

It does what httpcore's connection does for one request at a time, and fails as it fails: the same exception
classes (httpx's) with the same texts, so a record of a failed attempt reads the same. The socket stays blocking
with the kernel's timeouts (`SO_RCVTIMEO`/`SO_SNDTIMEO`, set when they change): no `settimeout` (an `ioctl`) and
no `poll` before each read and write, and a request goes out in one `send`. A TLS socket keeps Python's timeout
(the ssl module retries a read the kernel's timeout ended), set only when it changes. In the build's shape this cut
the CPU a request by a quarter to a third (bench/floor_bench.py): httpx's and httpcore's Python, not the system calls
(each the interpreter lock handed over and taken back), was the cost.

h11 itself then cost ~50 us of Python a request alone (~100 in a build): a request's head is made by h11 once per
header set (`RequestHead`), and a reply in the common shape (HTTP/1.1, a status >= 200 but 204 and 304, headers as
h11's own patterns read them, one Content-Length, no Transfer-Encoding) is read by one pattern over its head. Any
other reply, or one that ends early or sends more than its length, is handed to h11 as received (the reads so far
replayed into a connection that sent the same request, body bytes already given out as zeros of their length): h11
reads it and fails it as before, and the connection stays with h11 until it is closed (docs/scale/building.md,
"Session 62: the workers"). A connection that received bytes past a reply is closed, either way (`done`).
"""

from __future__ import annotations

import re
import select
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator

import h11
import httpx

READ_NUM_BYTES = 64 * 1024  # as httpcore
MAX_INCOMPLETE_EVENT_SIZE = 100 * 1024  # as httpcore: a head larger than this is a protocol error
KEEPALIVE_EXPIRY_S = 5.0  # httpx's default: an idle connection older than this is not used again
_TIMEVAL = struct.Struct("@ll")
_NOT_SET = -1.0  # no kernel timeout set yet (None means "wait for ever")
# h11's own patterns (h11/_abnf.py: status_line, header_field) for the one shape read without it: HTTP/1.1 only, and the
# head's lines all `\r\n`-ended with no fold (h11 reads a bare `\n` and a folded line too: those go to h11).
_VALUE = rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?"
_HEADER_LINE = rb"([-!#$%&'*+.^_`|~0-9a-zA-Z]+):[ \t]*(" + _VALUE + rb")[ \t]*\r\n"
_PLAIN_HEAD = re.compile(rb"HTTP/1\.1 ([0-9]{3})(?: ((?:[ \t]|[^\x00\s])*))?\r\n((?:" + _HEADER_LINE + rb")*)")
_HEADER = re.compile(_HEADER_LINE)
_BLANK_LINE = re.compile(rb"\n\r?\n")  # where h11 ends a head (h11/_receivebuffer.py)
CONTENT_LENGTH_MAX_DIGITS = 20  # as h11: a longer Content-Length is refused


def _timeval(seconds: float | None) -> bytes:
    if seconds is None:
        return _TIMEVAL.pack(0, 0)  # 0 is "no timeout" to the kernel
    whole = int(seconds)
    micro = max(int((seconds - whole) * 1_000_000), 1 if whole == 0 else 0)
    return _TIMEVAL.pack(whole, micro)


def _readable(sock: socket.socket) -> bool:
    """Has an idle connection something to read (the server's close, or bytes it had no reason to send)? Either
    way it is not reused. (httpcore checks the same; its helper is private, so not imported.)"""
    if sock.fileno() == -1:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _h11_connection() -> h11.Connection:
    return h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_INCOMPLETE_EVENT_SIZE)


class RequestHead:
    """A POST's target and headers (raw, in the order sent), the same for every request of one URL and header set but
    for its Content-Length (the item at `length_at`). Shared by threads: made once per shape (ProviderClient)."""

    def __init__(self, target: bytes, items: list[tuple[bytes, bytes]], length_at: int) -> None:
        self.target = target
        self._items = items
        self._length_at = length_at
        self._around: tuple[bytes, bytes] | None = None  # the head h11 writes, before and after the length

    def items(self, length: int) -> list[tuple[bytes, bytes]]:
        """The headers with this request's Content-Length."""
        items = list(self._items)
        items[self._length_at] = (items[self._length_at][0], b"%d" % length)
        return items

    def h11_request(self, length: int) -> h11.Request:
        return h11.Request(method=b"POST", target=self.target, headers=self.items(length))

    def encode(self, payload: bytes) -> bytes:
        """The request's bytes, as h11 writes them (raises h11.LocalProtocolError for what h11 refuses)."""
        around = self._around
        if around is None:  # (two threads may both make it: the same bytes)
            around = self._around = self._split()
        return b"".join((around[0], b"%d" % len(payload), around[1], payload))

    def _split(self) -> tuple[bytes, bytes]:
        """h11's head split around the length, checked against h11's head of another length."""
        written = _h11_connection().send(self.h11_request(0)) or b""
        line = b"\r\n%s: 0\r\n" % self._items[self._length_at][0]
        at = written.index(line) + len(line) - 3
        around = written[:at], written[at + 1:]
        check = _h11_connection().send(self.h11_request(1234567)) or b""
        if check != b"%s1234567%s" % around:
            raise AssertionError("h11 wrote a request head claw cannot fill in")
        return around


class _Plain:
    """A reply read without h11: the chunks its head came in (to replay into h11), what is left of its body."""

    def __init__(self, sent: tuple[RequestHead, bytes], chunks: list[bytes], first: bytes, left: int,
                 keep: bool) -> None:
        self.sent = sent  # the request's head and payload (for h11 to have sent them too)
        self.chunks = chunks  # the reads up to the end of the head (with `first`)
        self.first = first  # body bytes read with the head
        self.left = left  # body bytes not read yet
        self.keep = keep  # the connection may carry another request once this reply is read whole


class Wire:
    """One connection, used by one request at a time (a leased client's): `send`, then `body`, then `done`."""

    def __init__(self, tls: Callable[[], ssl.SSLContext]) -> None:
        self._tls = tls
        self._sock: socket.socket | None = None
        self._origin: tuple[str, bytes, int | None] | None = None
        self._conn: h11.Connection | None = None  # h11's, once a reply on this connection needed it
        self._plain: _Plain | None = None  # the reply being read without h11
        self._replay: list[bytes] = []  # chunks read before h11 took the reply over, for h11 to read first
        self._expire_at = 0.0
        self._deadline = float("inf")  # (time.monotonic) the exchange's end: a read after it is a timeout
        self._timeouts = {socket.SO_RCVTIMEO: _NOT_SET, socket.SO_SNDTIMEO: _NOT_SET}

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def send(self, url: httpx.URL, head: RequestHead, payload: bytes, timeout: httpx.Timeout,
             deadline: float = float("inf")) -> tuple[int, str, list[tuple[bytes, bytes]]]:
        """Send one request to `url` (`head` made for it); its reply's status, reason phrase and headers (raw, in
        order). Raises httpx's TransportError subclasses as httpx would; ReadTimeout for a read after `deadline`
        (time.monotonic: each read waits at most its timeout, so only this ends a server dripping its reply)."""
        self._deadline = deadline
        origin = (url.scheme, url.raw_host, url.port)
        if self._sock is not None and (origin != self._origin or time.monotonic() > self._expire_at
                                       or _readable(self._sock)):  # the server closed it meanwhile
            self.close()
        if self._sock is None:
            self._connect(url, timeout.connect)
            self._origin = origin
        conn = self._conn
        try:
            if conn is None:
                data = head.encode(payload)
            else:
                data = b"".join((conn.send(head.h11_request(len(payload))) or b"",
                                 conn.send(h11.Data(data=payload)) or b"", conn.send(h11.EndOfMessage()) or b""))
        except h11.LocalProtocolError as exc:  # e.g. a header value h11 refuses: httpcore's error and text
            self.close()
            raise httpx.LocalProtocolError(str(exc)) from exc
        try:
            self._set(socket.SO_SNDTIMEO, timeout.write)
            self._sock.sendall(data)  # type: ignore[union-attr]
        except (BlockingIOError, TimeoutError, ssl.SSLWantWriteError) as exc:
            self.close()
            raise httpx.WriteTimeout(str(exc) or "timed out") from exc
        except OSError:
            pass  # as httpcore: the server may have answered before closing; the read says what happened
        if conn is None:
            plain = self._plain_head(head, payload, timeout.read)
            if plain is not None:
                return plain
        while True:
            event = self._event(timeout.read)
            if isinstance(event, h11.Response):
                break
            if isinstance(event, h11.InformationalResponse) and event.status_code == 101:
                self.close()  # an upgrade claw never asks for: a malformed reply
                raise httpx.RemoteProtocolError("unexpected protocol upgrade")
        reason = event.reason.decode("ascii", errors="ignore")
        return event.status_code, reason, event.headers.raw_items()

    def body(self, read_timeout: float | None) -> Iterator[bytes]:
        """The reply's body as it arrives (still encoded, if the provider compressed it)."""
        plain = self._plain
        if plain is not None:
            yield from self._plain_body(plain, read_timeout)
        else:
            yield from self._h11_body(read_timeout, 0)

    def _h11_body(self, read_timeout: float | None, skip: int) -> Iterator[bytes]:
        """h11's Data events as bytes, less the first `skip` bytes (given out before h11 took the reply over)."""
        while True:
            event = self._event(read_timeout)
            if isinstance(event, h11.Data):
                data = bytes(event.data)
                if skip:
                    data, skip = data[skip:], max(0, skip - len(data))
                if data:
                    yield data
            elif isinstance(event, (h11.EndOfMessage, h11.PAUSED)):
                return

    def done(self) -> None:
        """The exchange is over (read whole or abandoned): keep the connection only if both sides finished and
        nothing was read past the reply. Bytes past it answer no request sent (h11 would keep them, as httpcore
        does, and read them as the next request's reply: a judgement or run recorded with another's content)."""
        plain, self._plain = self._plain, None
        conn = self._conn
        if plain is not None and plain.left == 0 and plain.keep:
            self._expire_at = time.monotonic() + KEEPALIVE_EXPIRY_S
        elif plain is None and conn is not None and conn.our_state is h11.DONE and conn.their_state is h11.DONE \
                and not conn.trailing_data[0]:
            conn.start_next_cycle()
            self._expire_at = time.monotonic() + KEEPALIVE_EXPIRY_S
        else:
            self.close()

    def _plain_head(self, head: RequestHead, payload: bytes,
                    read_timeout: float | None) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        """The reply's status, reason and headers when it has the shape read without h11 (the body left for `body`);
        None once h11 has the reply (`_to_h11`), to read as it would have from the start."""
        chunks: list[bytes] = []
        received = bytearray()  # (grown in place, searched from its new bytes: a head trickled a byte a read costs
        while True:             # what it costs h11, not that squared)
            data = self._read(read_timeout)
            chunks.append(data)
            received += data
            # Where h11 would stop waiting: its first blank line (`\n\r?\n`), or what it refuses at once (a head
            # starting with a blank line or a byte below "!"); at the end of the data; or once the head is too long.
            blank = _BLANK_LINE.search(received, max(0, len(received) - len(data) - 2))
            if blank is not None and blank.group() == b"\n\r\n" and received[blank.start() - 1:blank.start()] == b"\r":
                end = blank.start() - 1
                break
            if blank is not None or received[:1] != b"H" or not data or len(received) > MAX_INCOMPLETE_EVENT_SIZE:
                self._to_h11(head, payload, chunks)
                return None
        reply = bytes(received)
        found = _PLAIN_HEAD.fullmatch(reply, 0, end + 2)
        status = int(found.group(1)) if found is not None else 0
        if found is None or status < 200 or status in (204, 304):  # (no body, or a 1xx before the reply: h11's)
            self._to_h11(head, payload, chunks)
            return None
        headers = _HEADER.findall(found.group(3))
        length: int | None = None
        keep = True
        for name, value in headers:
            lower = name.lower()
            if lower == b"content-length":
                if length is not None or not value.isdigit() or len(value) > CONTENT_LENGTH_MAX_DIGITS:
                    self._to_h11(head, payload, chunks)  # (two, or a list: h11 agrees them or refuses)
                    return None
                length = int(value)
            elif lower == b"transfer-encoding":
                self._to_h11(head, payload, chunks)
                return None
            elif lower == b"connection" and b"close" in (part.strip() for part in value.lower().split(b",")):
                keep = False  # (as h11: the connection ends with this reply)
        first = reply[end + 4:]
        if length is None or len(first) > length:  # (read to its close, or more than the reply: h11's)
            self._to_h11(head, payload, chunks)
            return None
        self._plain = _Plain((head, payload), chunks, first, length - len(first), keep)
        reason = (found.group(2) or b"").decode("ascii", errors="ignore")
        return status, reason, headers

    def _plain_body(self, plain: _Plain, read_timeout: float | None) -> Iterator[bytes]:
        given = len(plain.first)
        if plain.first:
            yield plain.first
        while plain.left > 0:
            data = self._read(read_timeout)
            if not data or len(data) > plain.left:  # ended early, or more than the reply: h11 reads it all
                self._plain = None
                # The body's bytes given out already stand in as zeros (a length is all h11 counts of them): the
                # reply is not held twice.
                read = [bytes(given - len(plain.first))] if given > len(plain.first) else []
                self._to_h11(*plain.sent, [*plain.chunks, *read, data])
                self._event(read_timeout)  # (the reply's head, read above)
                yield from self._h11_body(read_timeout, given)
                return
            plain.left -= len(data)
            given += len(data)
            yield data

    def _to_h11(self, head: RequestHead, payload: bytes, chunks: list[bytes]) -> None:
        """h11 takes this connection over from here: a connection that sent this request, given the `chunks` read
        so far to read before the socket's."""
        conn = _h11_connection()
        conn.send(head.h11_request(len(payload)))
        conn.send(h11.Data(data=payload))
        conn.send(h11.EndOfMessage())
        self._conn = conn
        self._replay = list(chunks)

    def _connect(self, url: httpx.URL, timeout: float | None) -> None:
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            sock = socket.create_connection((host, port), timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if url.scheme == "https":
                sock = self._tls().wrap_socket(sock, server_hostname=host)
            else:
                sock.settimeout(None)  # blocking from here on: the kernel's timeouts
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from exc
        self._sock = sock
        self._conn = None  # (read without h11 again until a reply needs it)
        self._replay = []
        self._timeouts = {socket.SO_RCVTIMEO: _NOT_SET, socket.SO_SNDTIMEO: _NOT_SET}

    def _set(self, option: int, seconds: float | None) -> None:
        if self._timeouts[option] == seconds:
            return
        sock = self._sock
        if isinstance(sock, ssl.SSLSocket):
            # Python's own timeout: a TLS read on a blocking socket whose kernel timeout expires is tried again
            # for ever by the ssl module. Set only when it changes (reads and writes share it).
            sock.settimeout(seconds)
            self._timeouts = dict.fromkeys(self._timeouts, _NOT_SET)
        else:
            sock.setsockopt(socket.SOL_SOCKET, option, _timeval(seconds))  # type: ignore[union-attr]
        self._timeouts[option] = seconds  # type: ignore[assignment]

    def _event(self, read_timeout: float | None) -> h11.Event | type[h11.PAUSED]:
        """The next h11 event, reading as needed: httpcore's `_receive_event`, its errors and texts."""
        conn = self._conn
        assert conn is not None, "a reply h11 reads"
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                self.close()
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                return event
            data = self._read(read_timeout)
            if data == b"" and conn.their_state == h11.SEND_RESPONSE:
                self.close()
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
            conn.receive_data(data)

    def _read(self, read_timeout: float | None) -> bytes:
        if self._replay:  # (read before h11 took the reply over)
            return self._replay.pop(0)
        try:
            if time.monotonic() > self._deadline:
                raise TimeoutError("timed out")
            self._set(socket.SO_RCVTIMEO, read_timeout)
            return self._sock.recv(READ_NUM_BYTES)  # type: ignore[union-attr]
        except (BlockingIOError, TimeoutError, ssl.SSLWantReadError) as exc:
            self.close()
            raise httpx.ReadTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            self.close()
            raise httpx.ReadError(str(exc)) from exc
