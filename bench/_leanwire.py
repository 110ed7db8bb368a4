"""An httpcore network backend with fewer system calls an exchange (issue 54, a lean request path), for
bench/floor_bench.py's "shape lean wire" loop: measured and not taken (docs/scale/building.md "Session 47: the worker
side": the calls go, the CPU does not).

httpcore's own stream calls `settimeout` before every read and write (an `ioctl` each), and a socket with a
timeout polls before every `send` and `recv`; each of those calls hands the interpreter lock to another thread and
takes it back. Here the socket stays blocking and its timeouts are the kernel's (`SO_RCVTIMEO`/`SO_SNDTIMEO`), set
only when they change; the request's writes wait in a buffer and go out in one `send` when its reply is read.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

import httpcore
from httpcore._backends.sync import SyncBackend  # the connect and TLS start we keep as they are
from httpcore._utils import is_socket_readable

_TIMEVAL = struct.Struct("@ll")


def _timeval(seconds: float | None) -> bytes:
    """A socket timeout option's value: None (wait for ever) is 0 to the kernel."""
    if seconds is None:
        return _TIMEVAL.pack(0, 0)
    whole = int(seconds)
    micro = int(round((seconds - whole) * 1_000_000))
    if whole == 0 and micro == 0:
        micro = 1  # 0 would be "no timeout"
    return _TIMEVAL.pack(whole, micro)


class LeanStream(httpcore.NetworkStream):
    """A blocking socket whose reads and writes each make one system call (writes once per reply read)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(None)  # blocking: no poll before each call
        self._sock = sock
        self._read_timeout: float | None | bool = False  # False: the kernel's option not set yet
        self._write_timeout: float | None | bool = False
        self._pending: list[bytes] = []
        self._pending_timeout: float | None = None

    def _set(self, option: int, seconds: float | None) -> None:
        self._sock.setsockopt(socket.SOL_SOCKET, option, _timeval(seconds))

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._pending:
            self._flush()
        try:
            if timeout != self._read_timeout:
                self._set(socket.SO_RCVTIMEO, timeout)
                self._read_timeout = timeout
            return self._sock.recv(max_bytes)
        except (BlockingIOError, TimeoutError, ssl.SSLWantReadError) as exc:
            raise httpcore.ReadTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._pending.append(buffer)
            self._pending_timeout = timeout

    def _flush(self) -> None:
        data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending = []
        try:
            if self._pending_timeout != self._write_timeout:
                self._set(socket.SO_SNDTIMEO, self._pending_timeout)
                self._write_timeout = self._pending_timeout
            self._sock.sendall(data)
        except (BlockingIOError, TimeoutError, ssl.SSLWantWriteError) as exc:
            raise httpcore.WriteTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    def close(self) -> None:
        self._sock.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        upgraded = httpcore._backends.sync.SyncStream(self._sock).start_tls(ssl_context, server_hostname, timeout)
        return LeanStream(upgraded.get_extra_info("socket"))

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object" and isinstance(self._sock, ssl.SSLSocket):
            return self._sock._sslobj  # type: ignore[attr-defined]
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "socket":
            return self._sock
        if info == "is_readable":
            return is_socket_readable(self._sock)
        return None


class LeanBackend(SyncBackend):
    """httpcore's sync backend with LeanStream for its connections."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        stream = super().connect_tcp(host, port, timeout, local_address, socket_options)
        return LeanStream(stream.get_extra_info("socket"))
