"""A logging relay on 127.0.0.1 in front of a real server: it forwards every request and keeps each
exchange (path, status, request and response bodies), so a test counts and reads what claw sent.

A test may also script faults, one per chat request in turn (`faults`): a 429 with Retry-After or a
500 without usage answered in the server's place, or the server's real answer truncated mid-body or
held back until `release` is set; and be told when each reply has left (`on_reply`), to kill claw at
that moment. `tool_choice` makes a model that loops on tools: every request with tools reaches the server with that
choice (a forced tool), whatever claw sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

RATE_LIMITED = "429"  # answered here: 429 with `Retry-After: retry_after`, no usage (the server never saw it)
SERVER_ERROR = "500"  # forwarded, the server's answer replaced by a 500 without usage (paid, if the server bills)
TRUNCATED = "truncated"  # forwarded, half of the server's answer sent under its full Content-Length, then closed
HELD = "held"  # forwarded, the server's answer held until `release` is set (or claw is gone)


class Relay:
    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[dict[str, Any]] = []
        self.faults: list[str] = []  # the next chat requests' faults, taken in turn; none left: forwarded
        self.retry_after = "1"
        self.release = threading.Event()
        self.on_reply: Callable[[dict[str, Any]], None] | None = None  # after a chat reply has left
        self.tool_choice: Any = None  # sent instead of claw's to the server, on every request with tools
        self._lock = threading.Lock()
        self._open = 0  # requests taken and not yet answered (a killed claw's may still be at the server)
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

    def settle(self, timeout_s: float = 120) -> None:
        """Wait until every request taken has been answered and recorded: a killed claw's last request may still be
        at the server, and recorded after a later count began."""
        deadline = time.monotonic() + timeout_s
        while self._open and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not self._open, f"{self._open} request(s) still at the server after {timeout_s:g}s"

    def __enter__(self) -> Relay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    def _fault(self, path: str) -> str | None:
        with self._lock:
            return self.faults.pop(0) if path.endswith("/chat/completions") and self.faults else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # as a provider answers: kept alive, the reply read as claw reads one

            def do_POST(self) -> None:
                with relay._lock:
                    relay._open += 1
                try:
                    self._relay()
                finally:
                    with relay._lock:
                        relay._open -= 1

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.removeprefix("/v1")
                fault = relay._fault(self.path)
                if fault == RATE_LIMITED:
                    status, content, kind = 429, b'{"error": {"message": "rate limited"}}', "application/json"
                else:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() in ("authorization", "content-type")}
                    sent = body
                    if relay.tool_choice is not None and "tools" in (request := json.loads(body)):
                        sent = json.dumps({**request, "tool_choice": relay.tool_choice}).encode()
                    reply = relay._http.post(relay.upstream + path, content=sent, headers=headers)
                    status, content = reply.status_code, reply.content
                    kind = reply.headers.get("content-type", "application/json")
                    if fault == SERVER_ERROR:
                        status, content = 500, b'{"error": {"message": "internal error"}}'
                exchange = {"path": self.path, "status": status, "request": json.loads(body),
                            "response": _json(content), "fault": fault}
                with relay._lock:
                    relay.exchanges.append(exchange)
                if fault == HELD:
                    relay.release.wait(120)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(content)))
                    if fault == RATE_LIMITED:
                        self.send_header("Retry-After", relay.retry_after)
                    self.end_headers()
                    self.wfile.write(content[: len(content) // 2] if fault == TRUNCATED else content)
                    self.wfile.flush()
                except OSError:  # claw was killed while its answer was held: nobody to answer
                    return
                if fault == TRUNCATED:
                    self.close_connection = True
                if relay.on_reply is not None and path.endswith("/chat/completions"):
                    relay.on_reply(exchange)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

        return Handler


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content.decode(errors="replace")
