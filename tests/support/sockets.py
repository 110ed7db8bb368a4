"""Closing a test server's listening socket so the thread blocked in its accept() ends too."""

import contextlib
import socket


def stop_listening(listener: socket.socket) -> None:
    """Close `listener` and wake the thread waiting in its accept(): a plain close() leaves that thread blocked for
    good, and with it the connection it accepted last (a local of its loop), whose descriptor then stays open until
    the process ends. shutdown() on a listening socket makes a blocked accept() fail at once (Linux)."""
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    listener.close()


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on: a connection to it is refused, nothing is sent."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return int(closed.getsockname()[1])
