"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for tests and benchmarks, in-process or as a subprocess
(`python -m clawstore.testing.standin`). Usage and its rules: docs/runners.md (Stand-in server for tests; Details by
module)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import blake3
import httpx

from clawstore.testing.standin_batch import BatchService, last_prompt

DEFAULT_CONTENT = "stand-in answer"
BATCH_PATH = re.compile(r"/v1/batches/?([A-Za-z0-9_-]*)$")
CANCEL_PATH = re.compile(r"/v1/batches/([A-Za-z0-9_-]+)/cancel$")
FILE_CONTENT_PATH = re.compile(r"/v1/files/([A-Za-z0-9_-]+)/content$")
HANG_SECONDS = 300.0


def key_fingerprint(key: str) -> str:
    """How the stand-in records an API key: its BLAKE3 digest, never the key."""
    return "blake3:" + blake3.blake3(key.encode("utf-8")).hexdigest()


# Reply helpers: each returns the JSON object a rule holds.
def text(content: str, **extra: Any) -> dict[str, Any]:
    return {"content": content, **extra}


def empty(**extra: Any) -> dict[str, Any]:
    return {"content": "", **extra}


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None,
              content: str | None = None, **extra: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id:
        call["id"] = call_id
    return {"content": content, "tool_calls": [call], **extra}


def tool_calls(*calls: dict[str, Any], content: str | None = None, **extra: Any) -> dict[str, Any]:
    """Several calls in one reply: each `{"name", "arguments", "id"?}`."""
    return {"content": content, "tool_calls": list(calls), **extra}


def error(status: int, message: str = "stand-in error", retry_after: str | float | None = None,
          **extra: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {"status": status, "error": message, **extra}
    if retry_after is not None:
        reply["retry_after"] = str(retry_after)
    return reply


def malformed(raw: str = "{this is not json", status: int = 200) -> dict[str, Any]:
    return {"raw": raw, "status": status}


def hang(seconds: float = HANG_SECONDS) -> dict[str, Any]:
    return {"hang": seconds}


def held(gate: str, **extra: Any) -> dict[str, Any]:
    """A reply kept back until `StandIn.release(gate)` (or the server stops): "in flight until I say", where a
    latency would be a race with a loaded machine."""
    return {"held": gate, **extra}


def peak_at_once(requests: list[dict[str, Any]], since: float = 0.0) -> int:
    """The most of `requests` (`StandIn.requests`) received from `since` on that the server was answering at once."""
    edges = sorted((edge for r in requests if r["received_at"] >= since
                    for edge in ((r["received_at"], 1), (r.get("answered_at", math.inf), -1))),
                   key=lambda edge: (edge[0], edge[1]))  # (an answer at the same moment as an arrival: first)
    peak = at_once = 0
    for _, delta in edges:
        at_once += delta
        peak = max(peak, at_once)
    return peak


def _words(value: Any) -> int:
    return len(value.split()) if isinstance(value, str) else 0


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.rules: list[dict[str, Any]] = []
        self.default: dict[str, Any] = text(DEFAULT_CONTENT)
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0  # chat requests being answered now (from their arrival to their answer)
        self.peak = 0  # the most ever answered at once (since the last reset)
        self.batch = BatchService(self.pick, chat_completion)  # the Batch API (standin_batch.py)
        self.gates: dict[str, threading.Event] = {}  # held replies wait for theirs (StandIn.release)

    def gate(self, name: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(name, threading.Event())

    def answering(self, delta: int) -> None:
        with self.lock:
            self.in_flight += delta
            self.peak = max(self.peak, self.in_flight)

    def add_rule(self, model: str, replies: list[dict[str, Any]], match: str | None) -> None:
        if not replies or not all(isinstance(r, dict) for r in replies):
            raise ValueError("a rule needs a non-empty list of reply objects")
        with self.lock:
            self.rules.append({"model": model, "match": match, "replies": list(replies), "next": 0})

    def reset(self) -> None:
        with self.lock:
            self.rules.clear()
            self.requests.clear()
            self.default = text(DEFAULT_CONTENT)
            self.peak = self.in_flight
        self.batch.reset()

    def pick(self, model: str, messages: Any) -> dict[str, Any]:
        prompt = last_prompt(messages)
        with self.lock:
            for rule in self.rules:
                if rule["model"] not in ("*", model):
                    continue
                if rule["match"] is not None and rule["match"] not in prompt:
                    continue
                replies = rule["replies"]
                reply = replies[min(rule["next"], len(replies) - 1)]
                rule["next"] += 1
                return reply
            return self.default

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            requests, peak = [dict(r) for r in self.requests], self.peak
        return {"requests": requests, "counts": dict(Counter(r["model"] for r in requests)), "peak": peak}


def _usage(body: dict[str, Any], content: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Deterministic token counts (words) and a cost, in OpenRouter's shape."""
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    prompt = sum(_words(m.get("content")) for m in messages if isinstance(m, dict)) + 1
    completion = _words(content) + 5 * len(calls) + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "cost": round((prompt + 2 * completion) * 1e-6, 12)}


def _message(body: dict[str, Any], reply: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]],
                                                                    dict[str, Any]]:
    # Call ids derive from the request so that identical conversations give identical replies.
    seed = json.dumps(body.get("messages"), sort_keys=True).encode("utf-8")
    calls = []
    for index, call in enumerate(reply.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        calls.append({
            "id": call.get("id") or f"call_{blake3.blake3(seed + str(index).encode()).hexdigest()[:12]}",
            "type": "function",
            "function": {"name": call["name"],
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
        })
    content = reply.get("content", None if calls else DEFAULT_CONTENT)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    if reply.get("reasoning") is not None:
        message["reasoning"] = reply["reasoning"]
    return content, calls, message


def chat_completion(reply: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The chat.completion object a successful `reply` makes for the request `body`."""
    content, calls, message = _message(body, reply)
    # A reply's `usage` overrides the counted one; a field set to null is left out (`{"cost": None}`: a
    # server that reports no cost, as vLLM, Ollama and llama.cpp do).
    usage = {k: v for k, v in {**_usage(body, content, calls), **(reply.get("usage") or {})}.items() if v is not None}
    finish = reply.get("finish_reason") or ("tool_calls" if calls else "stop")
    return {
        "id": f"gen-{uuid.uuid4().hex[:16]}", "object": "chat.completion", "created": int(time.time()),
        "model": str(reply.get("model") or body.get("model")), "provider": reply.get("provider", "stand-in"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "native_finish_reason": finish}],
        "usage": usage,
    }


class _Handler(BaseHTTPRequestHandler):
    # Headers and body go out in separate writes; with Nagle on, the body waits for the client's
    # delayed ACK (~40 ms), which would be measured as provider latency.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        pass

    # --- plumbing -------------------------------------------------------------------------
    def _read_raw(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None, drip: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", f"req-{uuid.uuid4().hex[:12]}")
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        if not drip:
            self.wfile.write(payload)
            return
        # A server that trickles its body one byte at a time (per-request deadline tests).
        for index in range(len(payload)):
            if self.server.state.stopping.wait(drip):
                return
            self.wfile.write(payload[index:index + 1])
            self.wfile.flush()

    def _send_json(self, status: int, value: Any, headers: dict[str, str] | None = None,
                   drip: float = 0.0) -> None:
        self._send(status, json.dumps(value).encode("utf-8"), headers=headers, drip=drip)

    # --- routes ---------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        state = self.server.state
        if self.path.startswith("/_admin/requests"):
            self._send_json(200, state.snapshot())
        elif self.path.startswith("/_admin/health"):
            self._send_json(200, {"ok": True, "standin": True})
        elif self.path.startswith("/_admin/batch"):
            self._send_json(200, state.batch.stats())
        elif (match := BATCH_PATH.search(self.path.split("?")[0])) is not None:
            self._send_json(*(state.batch.get(match.group(1)) if match.group(1) else state.batch.listing()))
        elif (match := FILE_CONTENT_PATH.search(self.path)) is not None:
            data = state.batch.content(match.group(1))
            if data is None:
                self._send_json(404, {"error": {"message": f"no file {match.group(1)}"}})
            else:
                self._send(200, data, content_type="application/jsonl")
        elif self.path.endswith("/models"):
            with state.lock:
                models = sorted({r["model"] for r in state.rules if r["model"] != "*"})
            self._send_json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        raw = self._read_raw()
        batch = self.server.state.batch
        if self.path.rstrip("/").endswith("/v1/files"):
            self._send_json(*batch.upload(self.headers.get("Content-Type") or "", raw))
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._send_json(400, {"error": {"message": "request body is not JSON", "code": 400}})
            return
        if (match := CANCEL_PATH.search(self.path)) is not None:
            self._send_json(*batch.cancel(match.group(1)))
        elif self.path.rstrip("/").endswith("/v1/batches"):
            self._send_json(*batch.create(body if isinstance(body, dict) else {}))
        elif self.path.startswith("/_admin/batch"):
            batch.configure(body if isinstance(body, dict) else {})
            self._send_json(200, {"ok": True})
        elif self.path.startswith("/_admin/"):
            self._admin(body)
        elif self.path.rstrip("/").endswith("/chat/completions"):
            self._chat(body if isinstance(body, dict) else {})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def _admin(self, body: Any) -> None:
        state = self.server.state
        action = self.path[len("/_admin/"):].strip("/")
        try:
            if action == "script":
                if "default" in body:
                    with state.lock:
                        state.default = body["default"]
                rules = body.get("rules") or ([body] if "replies" in body else [])
                for rule in rules:
                    replies = rule["replies"]
                    if not isinstance(replies, list):
                        raise ValueError("replies must be a list")
                    state.add_rule(rule.get("model", "*"), replies, rule.get("match"))
            elif action == "reset":
                state.reset()
            elif action == "shutdown":
                # Answered before serve_forever is told to return: the process may end as soon as it does,
                # and a reply still being written (a loaded machine) was lost with it.
                self._send_json(200, {"ok": True})
                self.wfile.flush()
                threading.Thread(target=self.server.shutdown, name="standin-shutdown", daemon=True).start()
                return
            else:
                self._send_json(404, {"error": {"message": f"no admin action {action}"}})
                return
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._send_json(400, {"error": {"message": f"bad script: {exc}"}})
            return
        self._send_json(200, {"ok": True})

    def _record(self, body: dict[str, Any]) -> dict[str, Any]:
        auth = self.headers.get("Authorization")
        token = auth[7:] if auth and auth.startswith("Bearer ") else auth
        entry = {
            "path": self.path,
            "model": body.get("model"),
            "messages": body.get("messages"),
            "stream": bool(body.get("stream")),
            "body": body,
            "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"},
            "authorization": auth is not None,
            "key_fingerprint": key_fingerprint(token) if token else None,
            "received_at": time.time(),
        }
        with self.server.state.lock:
            self.server.state.requests.append(entry)
        return entry

    def _chat(self, body: dict[str, Any]) -> None:
        state = self.server.state
        entry = self._record(body)
        reply = state.pick(str(body.get("model")), body.get("messages"))
        # In flight while it "thinks": over before a byte of the answer leaves, so a client that has its
        # answer never finds it still counted (a sequential client's peak is 1).
        state.answering(+1)
        try:
            if reply.get("latency"):
                state.stopping.wait(float(reply["latency"]))
            if reply.get("held") is not None:
                gate = state.gate(str(reply["held"]))
                while not gate.wait(0.05) and not state.stopping.is_set():
                    pass
            if reply.get("hang"):
                # Say nothing until the client gives up (or the server stops), then drop the connection.
                state.stopping.wait(float(reply["hang"]))
                self.close_connection = True
                return
        finally:
            state.answering(-1)
            with state.lock:
                entry["answered_at"] = time.time()  # (its answer is sent next)
        self._answer(reply, body)

    def _answer(self, reply: dict[str, Any], body: dict[str, Any]) -> None:
        status = int(reply.get("status", 200))
        headers = dict(reply.get("headers") or {})
        if reply.get("retry_after") is not None:
            headers["Retry-After"] = str(reply["retry_after"])
        if "raw" in reply:
            self._send(status, str(reply["raw"]).encode("utf-8"), headers=headers)
            return
        if "body" in reply:
            self._send_json(status, reply["body"], headers=headers)
            return
        if status >= 400:
            payload: dict[str, Any] = {"error": {"message": reply.get("error", "stand-in error"),
                                                 "code": status}}
            if reply.get("usage") is not None:
                payload["usage"] = reply["usage"]
            self._send_json(status, payload, headers=headers)
            return
        completion = chat_completion(reply, body)
        if body.get("stream"):
            choice = completion["choices"][0]
            self._stream(completion["id"], completion["model"], choice["message"], choice["finish_reason"],
                         completion["usage"], headers)
            return
        self._send_json(status, completion, headers=headers, drip=float(reply.get("drip") or 0.0))

    def _stream(self, response_id: str, model: str, message: dict[str, Any], finish: str,
                usage: dict[str, Any], headers: dict[str, str]) -> None:
        """Server-Sent Events in OpenAI's chunk format, closed by `data: [DONE]`."""
        created = int(time.time())

        def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None,
                  with_usage: bool = False) -> bytes:
            event: dict[str, Any] = {"id": response_id, "object": "chat.completion.chunk", "created": created,
                                     "model": model, "provider": "stand-in",
                                     "choices": [] if delta is None else
                                     [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if with_usage:
                event["usage"] = usage
            return f"data: {json.dumps(event)}\n\n".encode()

        parts = [chunk({"role": "assistant", "content": ""})]
        if message.get("reasoning"):
            parts.append(chunk({"reasoning": message["reasoning"]}))
        for piece in re.findall(r"\S+\s*|\s+", message.get("content") or ""):
            parts.append(chunk({"content": piece}))
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            parts.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                "function": {"name": function["name"], "arguments": ""}}]}))
            args = function["arguments"]
            half = len(args) // 2
            for piece in (args[:half], args[half:]):
                if piece:
                    parts.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        parts.append(chunk({}, finish))
        parts.append(chunk(None, with_usage=True))
        parts.append(b"data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("x-request-id", f"req-{uuid.uuid4().hex[:12]}")
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.close_connection = True
        for part in parts:
            self.wfile.write(part)
            self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops connections when a build opens 16 at once; the
    # client then waits a 1 s SYN retransmit, which would be measured as provider latency.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout tests) is expected; anything else is still reported.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def __init__(self, address: tuple[str, int], state: _State):
        self.state = state
        self._open: set[socket.socket] = set()  # connections being served (kept alive between requests)
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End the connections clients still keep alive: each handler thread reads the end and closes its own (a
        client outliving the stand-in held them, and their descriptors here, open)."""
        with self._open_lock:
            held = list(self._open)
        for conn in held:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class StandIn:
    """The stand-in server in a background thread. `base_url` ends in `/v1`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._state = _State()
        self._server = _Server((host, port), self._state)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._server.server_address[0]}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> StandIn:
        # A short poll interval keeps stop() quick (shutdown waits for the next poll).
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="standin", daemon=True)
        self._thread.start()
        return self

    def serve(self) -> None:
        """Serve in this thread until Ctrl-C (KeyboardInterrupt, raised on) or an admin shutdown."""
        try:
            self._server.serve_forever(poll_interval=0.05)
        finally:
            self._state.stopping.set()
            self._server.server_close()

    def stop(self) -> None:
        self._state.stopping.set()  # release hanging / slow replies
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, model: str = "*", *replies: dict[str, Any], match: str | None = None) -> None:
        self._state.add_rule(model, list(replies), match)

    def set_default(self, reply: dict[str, Any]) -> None:
        with self._state.lock:
            self._state.default = reply

    def release(self, gate: str) -> None:
        """Let the replies `held(gate)` keeps back (and any later ones) be answered."""
        self._state.gate(gate).set()

    def reset(self) -> None:
        self._state.reset()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._state.snapshot()["requests"]

    def counts(self) -> dict[str, int]:
        return self._state.snapshot()["counts"]

    @property
    def peak(self) -> int:
        """The most chat requests answered at once since the last reset (a client's real concurrency)."""
        with self._state.lock:
            return self._state.peak

    def batch_settings(self, **settings: Any) -> None:
        """The Batch API's delay, expiry and failures (clawstore/testing/standin_batch.py)."""
        self._state.batch.configure(settings)

    def batch_stats(self) -> dict[str, Any]:
        return self._state.batch.stats()


class StandInProcess:
    """The stand-in as a child process (`python -m clawstore.testing.standin`), driven over HTTP."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "clawstore.testing.standin", "--port", "0", "--print-port"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.isdigit():
            self._proc.kill()
            raise RuntimeError(f"stand-in did not start (got {line!r})")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        self._http = httpx.Client(base_url=self.url, timeout=10)

    def __enter__(self) -> StandInProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._http.close()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def script(self, model: str = "*", *replies: dict[str, Any], match: str | None = None) -> None:
        self._http.post("/_admin/script", json={"model": model, "match": match,
                                                "replies": list(replies)}).raise_for_status()

    def set_default(self, reply: dict[str, Any]) -> None:
        self._http.post("/_admin/script", json={"default": reply}).raise_for_status()

    def reset(self) -> None:
        self._http.post("/_admin/reset").raise_for_status()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._http.get("/_admin/requests").json()["requests"]

    def counts(self) -> dict[str, int]:
        return self._http.get("/_admin/requests").json()["counts"]

    @property
    def peak(self) -> int:
        return int(self._http.get("/_admin/requests").json()["peak"])

    def batch_settings(self, **settings: Any) -> None:
        self._http.post("/_admin/batch", json=settings).raise_for_status()

    def batch_stats(self) -> dict[str, Any]:
        return dict(self._http.get("/_admin/batch").json())


def main(argv: list[str] | None = None, prepare: Callable[[StandIn], None] | None = None,
         prog: str = "python3 -m clawstore.testing.standin") -> int:
    """Serve until Ctrl-C or SIGTERM; `prepare` scripts the server first (simulated.py: `claw demo`'s replies)."""
    parser = argparse.ArgumentParser(prog=prog, description="OpenAI-compatible stand-in server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--print-port", action="store_true", help="print the bound port on stdout")
    parser.add_argument("--script", help="JSON file with {rules: [...], default: {...}} to load")
    args = parser.parse_args(argv)
    server = StandIn(args.host, args.port)
    if prepare is not None:
        prepare(server)
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            data = json.load(handle)
        for rule in data.get("rules", []):
            server.script(rule.get("model", "*"), *rule["replies"], match=rule.get("match"))
        if "default" in data:
            server.set_default(data["default"])
    if args.print_port:
        print(server.port, flush=True)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        server.serve()
    except KeyboardInterrupt:
        pass
    return 0


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM stops serve_forever like Ctrl-C


if __name__ == "__main__":
    sys.exit(main())
