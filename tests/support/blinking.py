"""A TCP proxy on a loopback port in front of a test server that can go away for a while, as a server restarting does:
while it is out, every connection it carried is closed and a new one to its port is refused."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from urllib.parse import urlparse

from tests.support.sockets import stop_listening


class BlinkingProxy:
    """Forwards 127.0.0.1:<port> to `target` (http://HOST:PORT) byte for byte. `out()` closes every connection and the
    listening socket (connecting is refused); `back()` listens on the same port again."""

    def __init__(self, target: str):
        parsed = urlparse(target)
        self.target = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.listener = self._listen(0)
        self.port: int = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._serve(self.listener)

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        return listener

    def _serve(self, listener: socket.socket) -> None:
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # (out(): the listener closed)
            server = socket.create_connection(self.target)
            with self._lock:
                self.accepted += 1
                self._open |= {client, server}
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(1 << 16):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)  # (the other way may still carry an answer)

    def out(self) -> None:
        stop_listening(self.listener)
        with self._lock:
            carried, self._open = self._open, set()
        for sock in carried:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def back(self) -> None:
        self.listener = self._listen(self.port)
        self._serve(self.listener)

    def __enter__(self) -> BlinkingProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.out()
