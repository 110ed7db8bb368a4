"""What a request sent through httpx (a proxy in the environment, a reply's cookie held) needs that httpx does not do,
and the wire (providers/wire.py) does: bytes left on a connection past a reply are never read as the next reply.
"""

from __future__ import annotations

import socket
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
    no connection is kept. The socket is shut down, so httpcore's idle check finds it closed and drops it."""
    state = h11_connection(reply)
    if state is None or any(state.trailing_data):
        cut(reply.extensions.get("network_stream"))
    reply.close()


def cut(stream: Any) -> None:
    """Shut an httpcore network stream's socket down: a read blocked on it in another thread ends at once (a close
    alone would not wake it), and the connection is never used again."""
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # (not SSLSocket's, which drops its TLS state first)
        except OSError:  # closed already
            pass
