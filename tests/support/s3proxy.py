"""An HTTP proxy on 127.0.0.1 in front of the loopback S3 server (tests/support/s3server.py) that misbehaves as a test
says: real HTTP, real boto3 on the other side. A test subclasses `S3Proxy` and overrides `answer`, which sees each
request and answers it with `Call`'s moves: forward it, reply whole or in part, cut the connection, or hold it until
the proxy closes. tests/remote/test_hostile_s3.py (pack bodies that break off or stall) and
tests/remote/test_lost_ref_answer.py (ref swaps applied whose answer is lost) use it."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

_NOT_COPIED = ("content-length", "transfer-encoding", "connection", "content-encoding")  # (the proxy sets its own)


class Call:
    """One request to the proxy, and the ways to answer it."""

    def __init__(self, handler: BaseHTTPRequestHandler, proxy: S3Proxy):
        self._handler, self._proxy = handler, proxy
        self.command, self.path, self.headers = handler.command, handler.path, handler.headers
        length = int(self.headers.get("Content-Length") or 0)
        self.body = handler.rfile.read(length) if length else b""

    def forward(self) -> httpx.Response:
        """Send it on to the S3 server; its answer (not yet passed back)."""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        return httpx.request(self.command, self._proxy.target + self.path, headers=headers, content=self.body,
                             timeout=30)

    def reply(self, reply: httpx.Response, part: int | None = None) -> None:
        """Pass the server's answer back: its status, headers and whole Content-Length, and of its body the first
        `part` bytes if given (the rest never comes: follow with `cut` or `hold`)."""
        data = reply.content
        out = self._handler
        out.send_response(reply.status_code)
        for k, v in reply.headers.items():
            if k.lower() not in _NOT_COPIED:
                out.send_header(k, v)
        out.send_header("Content-Length", str(len(data)))
        out.end_headers()
        out.wfile.write(data if part is None else data[:part])
        out.wfile.flush()

    def cut(self) -> None:
        """Break the connection now (the client sees it reset: what botocore retries)."""
        self._handler.close_connection = True
        self._handler.connection.shutdown(socket.SHUT_RDWR)

    def hold(self, limit: float = 120) -> None:
        """Say nothing more until the proxy closes (`limit` seconds at most), then close the connection."""
        self._proxy.closing.wait(limit)
        self._handler.close_connection = True


class S3Proxy:
    """Forwards every request to `target` (the S3 server's URL) as it is, unless `answer` says otherwise."""

    def __init__(self, target: str):
        self.target = target
        self.closing = threading.Event()  # set by `close`: what a held request waits for
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                proxy.answer(Call(self, proxy))

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, call: Call) -> None:
        """The hook: how each request is answered (here, forwarded as it is)."""
        call.reply(call.forward())

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
