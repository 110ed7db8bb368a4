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
"""

from __future__ import annotations

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


class Wire:
    """One connection, used by one request at a time (a leased client's): `send`, then `body`, then `done`."""

    def __init__(self, tls: Callable[[], ssl.SSLContext]) -> None:
        self._tls = tls
        self._sock: socket.socket | None = None
        self._origin: tuple[str, bytes, int | None] | None = None
        self._conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_INCOMPLETE_EVENT_SIZE)
        self._expire_at = 0.0
        self._timeouts = {socket.SO_RCVTIMEO: _NOT_SET, socket.SO_SNDTIMEO: _NOT_SET}

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def send(self, url: httpx.URL, head: list[tuple[bytes, bytes]], payload: bytes,
             timeout: httpx.Timeout) -> tuple[int, str, list[tuple[bytes, bytes]]]:
        """Send one request; its reply's status, reason phrase and headers (raw, in order). Raises httpx's
        TransportError subclasses as httpx would."""
        origin = (url.scheme, url.raw_host, url.port)
        if self._sock is not None and (origin != self._origin or time.monotonic() > self._expire_at
                                       or _readable(self._sock)):  # the server closed it meanwhile
            self.close()
        if self._sock is None:
            self._connect(url, timeout.connect)
            self._origin = origin
        conn = self._conn
        try:
            data = b"".join((conn.send(h11.Request(method=b"POST", target=url.raw_path, headers=head)) or b"",
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
        while True:
            event = self._event(read_timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, (h11.EndOfMessage, h11.PAUSED)):
                return

    def done(self) -> None:
        """The exchange is over (read whole or abandoned): keep the connection only if both sides finished."""
        if self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE:
            self._conn.start_next_cycle()
            self._expire_at = time.monotonic() + KEEPALIVE_EXPIRY_S
        else:
            self.close()

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
        self._conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_INCOMPLETE_EVENT_SIZE)
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
        try:
            self._set(socket.SO_RCVTIMEO, read_timeout)
            return self._sock.recv(READ_NUM_BYTES)  # type: ignore[union-attr]
        except (BlockingIOError, TimeoutError, ssl.SSLWantReadError) as exc:
            self.close()
            raise httpx.ReadTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            self.close()
            raise httpx.ReadError(str(exc)) from exc
