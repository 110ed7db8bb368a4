"""A logging relay on 127.0.0.1 in front of a real server: it forwards every request and keeps each
exchange (path, status, request and response bodies), so a test counts and reads what claw sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class Relay:
    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=120)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chats(self) -> list[dict[str, Any]]:
        """The chat-completion exchanges so far, in the order they were answered."""
        with self._lock:
            return [e for e in self.exchanges if e["path"].endswith("/chat/completions")]

    def __enter__(self) -> Relay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.removeprefix("/v1")
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                reply = relay._http.post(relay.upstream + path, content=body, headers=headers)
                with relay._lock:
                    relay.exchanges.append({"path": self.path, "status": reply.status_code,
                                            "request": json.loads(body), "response": _json(reply.content)})
                self.send_response(reply.status_code)
                self.send_header("Content-Type", reply.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

        return Handler


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content.decode(errors="replace")
