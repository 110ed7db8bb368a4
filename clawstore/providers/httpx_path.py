"""What a request sent through httpx (a proxy in the environment, a reply's cookie held) needs that httpx does not do,
and the wire (providers/wire.py) does: bytes left on a connection past a reply are never read as the next reply,
and the exchange's deadline ends a read that each byte of a dripped reply keeps alive (httpx's timeouts are per read).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from typing import Any

import h11
import httpx

# The private attributes that lead from an httpx reply to the h11 connection it was read on (httpx's BoundSyncStream
# and ResponseStream, httpcore's PoolByteStream, HTTP11ConnectionByteStream and HTTP11Connection), in any order.
_INNER = ("_stream", "_httpcore_stream", "_connection", "_h11_state")
_DEPTH = 8


def h11_connection(reply: httpx.Response) -> h11.Connection | None:
    """The h11 connection `reply` was read on; None where httpx's or httpcore's insides are not as expected."""
    found: Any = reply.stream
    for _ in range(_DEPTH):
        if isinstance(found, h11.Connection):
            return found
        found = next((getattr(found, name) for name in _INNER if hasattr(found, name)), None)
    return None


def close_reply(reply: httpx.Response) -> None:
    """Close a reply read through httpx, its connection never used again when anything was left on it past the
    reply's end: h11 (so httpcore) would read those bytes as the next request's reply. Where that cannot be seen,
    no connection is kept. The socket is shut down, so httpcore's idle check finds it closed and drops it. (HTTP/2,
    which only a given transport may speak, frames each reply: nothing of one is read as another.) For a leased
    client's reply only: httpx has handed the connection back by now (see SharedCheck)."""
    if reply.http_version != "HTTP/2":
        state = h11_connection(reply)
        if state is None or any(state.trailing_data):
            cut(reply.extensions.get("network_stream"))
    reply.close()


class SharedCheck:
    """close_reply's check for a reply on a client the threads share (a given transport's): httpx hands a reply's
    connection back to the pool as its body ends, where another thread's request may take it at once, so the check is
    made as httpcore starts to hand it back (its `trace` event), never after (a cut then could end that request)."""

    def __init__(self) -> None:
        self.reply: httpx.Response | None = None

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event != "http11.response_closed.started" or self.reply is None:
            return
        state = h11_connection(self.reply)
        if state is None:
            cut(self.reply.extensions.get("network_stream"))
        elif any(state.trailing_data):
            state.send_failed()  # h11 in ERROR: httpcore closes the connection instead of making it idle


def cut(stream: Any) -> None:
    """Shut an httpcore network stream's socket down: a read blocked on it in another thread ends at once (a close
    alone would not wake it), and the connection is never used again."""
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # (not SSLSocket's, which drops its TLS state first)
        except OSError:  # closed already
            pass


class Streams:
    """The network streams one leased httpx client's connections were opened on, learnt from httpcore's `trace`
    request extension, so that the watchdog can cut the exchange in flight (the client sends one at a time)."""

    def __init__(self) -> None:
        self._streams: list[Any] = []
        self._lock = threading.Lock()
        self.expired = False  # the exchange's deadline passed: a connection it opens later is cut as it opens

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            with self._lock:
                self._streams = [stream for stream in self._streams if _open(stream)]
                self._streams.append(info["return_value"])
                if self.expired:
                    cut(info["return_value"])

    def cut_all(self) -> None:
        with self._lock:
            self.expired = True
            streams = list(self._streams)
        for stream in streams:
            cut(stream)


class Watchdog:
    """One thread for a ProviderClient's leased clients: it cuts a client's connections once the deadline it was
    armed with passes (the read then fails; a failure after the deadline is the exchange's timeout). Arming costs a
    lock and a comparison: the thread is woken only for a deadline earlier than the one it sleeps until (a thread
    per exchange, threading.Timer, cost a request through httpx half its CPU again)."""

    def __init__(self) -> None:
        self._armed: dict[Streams, float] = {}  # a client's streams -> its exchange's deadline (time.monotonic)
        self._changed = threading.Condition()
        self._wakes_at = math.inf
        self._thread: threading.Thread | None = None
        self._stopped = False

    def arm(self, streams: Streams, deadline: float) -> None:
        with self._changed:
            streams.expired = False
            self._armed[streams] = deadline
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="claw-httpx-watchdog", daemon=True)
                self._thread.start()
            elif deadline < self._wakes_at:
                self._changed.notify()

    def disarm(self, streams: Streams) -> None:
        with self._changed:
            self._armed.pop(streams, None)

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()

    def _run(self) -> None:
        with self._changed:
            while not self._stopped:
                now = time.monotonic()
                due = [streams for streams, deadline in self._armed.items() if deadline <= now]
                for streams in due:
                    del self._armed[streams]
                    streams.cut_all()
                self._wakes_at = min(self._armed.values(), default=math.inf)
                self._changed.wait(None if self._wakes_at == math.inf else self._wakes_at - now)


def _open(stream: Any) -> bool:
    sock = stream.get_extra_info("socket")
    return isinstance(sock, socket.socket) and sock.fileno() >= 0
