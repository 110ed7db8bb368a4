"""A request that left is never `nothing_sent` (a known 0 at any price): not when the server read it and closed the
connection or reset it, nor when an attempt that went out (answered 429 or 500, or timed out) is followed by one
refused. A real server on 127.0.0.1 that reads each request whole, then does what the test scripts; once its script is
done it stops listening, so the next attempt's connection is refused. The client alone, and a real `claw` build."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from clawstore.providers import ProviderClient, ProviderError
from clawstore.providers.endpoint import Endpoint
from clawstore.providers.usage import SENT_UNANSWERED
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.prepared import run_here
from tests.support.workspace import Workspace


class Server:
    """Accepts one connection per scripted step: reads the request whole, then `close` (FIN), `reset` (RST), `hang`
    (no reply until the client gives up), a status code (a reply without usage) or `charset=NAME` (an answer with
    usage, its Content-Type naming that charset). `forever`: the last step again for
    every later connection, else the port stops listening once the script is done."""

    def __init__(self, *steps: str | int, forever: bool = False) -> None:
        self.steps, self.forever = list(steps), forever
        self.read: list[bytes] = []  # each request's body, as the server read it
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        index = 0
        while index < len(self.steps) or self.forever:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            step = self.steps[min(index, len(self.steps) - 1)]
            index += 1
            threading.Thread(target=self._answer, args=(conn, step), daemon=True).start()
        self.listener.close()  # nobody listens: the next connection is refused

    def _answer(self, conn: socket.socket, step: str | int) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(body) < length:
                body += conn.recv(65536)
            self.read.append(body)
            if step == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif step == "hang":
                time.sleep(3)
            elif isinstance(step, str) and step.startswith("charset="):  # an answer, in a codec named by its charset
                answer = json.dumps({"id": "r1", "model": "vendor/m1", "choices": [{"message": {
                    "role": "assistant", "content": "4"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2}}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json; %s\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n%s" % (step.encode(), len(answer), answer))
            elif isinstance(step, int):
                text = b'{"error": {"message": "busy"}}'
                conn.sendall(b"HTTP/1.1 %d Busy\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n%s" % (step, len(text), text))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for server in made:
        server.close()


@pytest.mark.parametrize("steps", [("close",), ("reset",), ("hang",), (429,), (500,), ("close", 500), (429, "reset")],
                         ids=str)
def test_an_attempt_that_went_out_then_one_refused_is_not_nothing_sent(servers: list[Server],
                                                                       steps: tuple[str | int, ...]) -> None:
    server = Server(*steps)
    servers.append(server)
    with ProviderClient(backoff_base=0.01) as client, pytest.raises(ProviderError) as failed:
        client.chat(Endpoint(server.base_url, None), {"model": "vendor/m", "messages": []}, timeout=1,
                    retries=len(steps))  # (the last attempt: the connection refused)
    assert failed.value.attempts == len(steps) + 1 and failed.value.code == "transport_error", failed.value
    assert len(server.read) == len(steps)  # each request but the last was read whole by the server
    usage = failed.value.usage
    assert not usage.nothing_sent and "nothing_sent" not in usage.to_json(), usage
    if any(isinstance(step, str) for step in steps):  # sent, never answered: unknown (an error reply counted none)
        assert usage.rejected == SENT_UNANSWERED and usage.cost_usd is None, usage


def test_a_run_whose_request_was_read_then_dropped_costs_unknown_not_0(
        ws: Workspace, servers: list[Server], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # no price declared: a known 0 here ('0.000000 USD', 'priced') would be money spent shown as none
    server = Server("close", forever=True)
    servers.append(server)
    monkeypatch.setenv("OPENROUTER_BASE_URL", server.base_url)
    ws.run_profile(defaults={"retries": 0})
    built = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp")
    assert built.code == 1 and "Traceback" not in built.stderr, built
    assert len(server.read) == 4
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    assert "(4 of 4 unknown)" in line, line
    done = run_here(ws.root, "query", "select status, cost_usd, cost_source from runs", "--format", "json")
    assert json.loads(done.stdout) == [{"status": "provider_error", "cost_usd": None, "cost_source": "unknown"}] * 4, \
        done.stdout


@pytest.mark.parametrize("charset", ["charset=idna", "charset=rot13", "charset=hex"])
def test_an_answer_in_an_odd_charset_is_read_not_taken_for_nothing_sent(
        ws: Workspace, servers: list[Server], monkeypatch: pytest.MonkeyPatch, charset: str) -> None:  # noqa: F811
    # a codec Python knows but cannot decode a reply with (not text, or no 'replace'): the client raised it, the run
    # ended runner_execution_failed with the usage of no call, and its answered, billed request cost a known 0
    server = Server(charset, forever=True)
    servers.append(server)
    monkeypatch.setenv("OPENROUTER_BASE_URL", server.base_url)
    ws.run_profile(defaults={"retries": 0})
    built = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp")
    assert "Traceback" not in built.stderr and len(server.read) == 4, built
    done = run_here(ws.root, "query", "select status, input_tokens, cost_usd, cost_source from runs", "--format",
                    "json")
    assert json.loads(done.stdout) == [{"status": "success", "input_tokens": 10, "cost_usd": None,
                                        "cost_source": "unknown"}] * 4, done.stdout
