"""The stand-in server itself: scripting, sequences, recording, SSE streaming, subprocess mode."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from clawstore.providers import Endpoint, ProviderClient
from clawstore.testing.standin import (
    DEFAULT_CONTENT,
    StandIn,
    StandInProcess,
    empty,
    held,
    key_fingerprint,
    text,
    tool_call,
    tool_calls,
)


def _post(server: StandIn, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=5,
                      headers={"Authorization": "Bearer sk-standin-key"})


def _content(response: httpx.Response) -> Any:
    return response.json()["choices"][0]["message"]["content"]


def _ask(model: str, prompt: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "system", "content": "be brief"},
                                         {"role": "user", "content": prompt}]}


def test_rules_sequences_matches_and_default(standin: StandIn) -> None:
    standin.script("a", text("first"), text("second"))
    standin.script("b", text("about cats"), match="cats")
    assert _content(_post(standin, _ask("a", "x"))) == "first"
    assert _content(_post(standin, _ask("a", "x"))) == "second"
    assert _content(_post(standin, _ask("a", "x"))) == "second"  # the last reply repeats
    assert _content(_post(standin, _ask("b", "tell me about cats"))) == "about cats"
    assert _content(_post(standin, _ask("b", "dogs"))) == DEFAULT_CONTENT
    assert _content(_post(standin, _ask("c", "x"))) == DEFAULT_CONTENT
    assert standin.counts() == {"a": 3, "b": 2, "c": 1}
    request = standin.requests[0]
    assert request["authorization"] and request["key_fingerprint"] == key_fingerprint("sk-standin-key")
    assert "sk-standin-key" not in json.dumps(standin.requests)
    standin.reset()
    assert standin.requests == [] and _content(_post(standin, _ask("a", "x"))) == DEFAULT_CONTENT


def test_default_usage_shape_and_empty_reply(standin: StandIn) -> None:
    standin.script("e", empty())
    data = _post(standin, _ask("e", "one two three")).json()
    assert data["choices"][0]["message"]["content"] == ""
    assert set(data["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens", "cost"}
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]


def _read_sse(response: httpx.Response) -> tuple[list[dict[str, Any]], bool]:
    events, done = [], False
    for line in response.iter_lines():
        if not line.startswith("data: "):
            continue
        payload = line[len("data: "):]
        if payload == "[DONE]":
            done = True
        else:
            events.append(json.loads(payload))
    return events, done


def test_streaming_text_and_tool_calls(standin: StandIn) -> None:
    standin.script("s", text("hello streaming world"),
                   tool_calls({"name": "read_file", "arguments": {"path": "/tmp/a"}},
                              {"name": "exec_shell", "arguments": {"command": "ls -la"}}))
    with httpx.stream("POST", f"{standin.base_url}/chat/completions", timeout=5,
                      json={**_ask("s", "go"), "stream": True}) as response:
        assert response.headers["content-type"] == "text/event-stream"
        events, done = _read_sse(response)
    assert done
    text_out = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text_out == "hello streaming world"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] > 0
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "stop"

    with httpx.stream("POST", f"{standin.base_url}/chat/completions", timeout=5,
                      json={**_ask("s", "go"), "stream": True}) as response:
        events, done = _read_sse(response)
    calls: dict[int, dict[str, str]] = {}
    for event in events:
        for choice in event["choices"]:
            for part in choice["delta"].get("tool_calls") or []:
                slot = calls.setdefault(part["index"], {"name": "", "arguments": "", "id": ""})
                slot["id"] += part.get("id", "")
                slot["name"] += part.get("function", {}).get("name", "")
                slot["arguments"] += part.get("function", {}).get("arguments", "")
    assert done and len(calls) == 2
    assert calls[0]["name"] == "read_file" and json.loads(calls[0]["arguments"]) == {"path": "/tmp/a"}
    assert calls[1]["name"] == "exec_shell" and json.loads(calls[1]["arguments"]) == {"command": "ls -la"}
    assert calls[0]["id"] and calls[0]["id"] != calls[1]["id"]
    finishes = [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]]
    assert finishes == ["tool_calls"]


def test_tool_call_ids_are_deterministic(standin: StandIn) -> None:
    standin.script("t", tool_call("read_file", {"path": "x"}))
    first = _post(standin, _ask("t", "same")).json()["choices"][0]["message"]["tool_calls"][0]["id"]
    second = _post(standin, _ask("t", "same")).json()["choices"][0]["message"]["tool_calls"][0]["id"]
    other = _post(standin, _ask("t", "different")).json()["choices"][0]["message"]["tool_calls"][0]["id"]
    assert first == second != other


def test_subprocess_mode_with_admin_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_SUBPROCESS_KEY", "sk-subprocess")
    with StandInProcess() as server, ProviderClient(backoff_base=0.01) as client:
        server.script("p", text("from a child process"))
        endpoint = Endpoint(server.base_url, "CLAW_SUBPROCESS_KEY")
        result = client.chat(endpoint, _ask("p", "hi"), timeout=5, retries=0)
        assert result.message["content"] == "from a child process"
        assert server.counts() == {"p": 1}
        assert server.requests[0]["key_fingerprint"] == key_fingerprint("sk-subprocess")
        server.reset()
        assert server.requests == []
        assert client.chat(endpoint, _ask("p", "hi"), timeout=5, retries=0).message["content"] == DEFAULT_CONTENT
        bad = httpx.post(f"{server.url}/_admin/script", json={"replies": "nope"}, timeout=5)
        assert bad.status_code == 400


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.01)


def test_peak_counts_the_requests_answered_at_once(standin: StandIn) -> None:
    # Held until all four have arrived (a latency of 0.3 s let a loaded machine answer one before the last came).
    standin.script("m1", held("four"), match="q")
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = [pool.submit(_post, standin, _ask("m1", f"q{i}")) for i in range(4)]
        _until(lambda: len(standin.requests) == 4)
        assert not any(answer.done() for answer in answers)  # held: none answered before the gate opens
        standin.release("four")
        assert [_content(answer.result()) for answer in answers] == [DEFAULT_CONTENT] * 4
    _post(standin, _ask("m1", "alone"))
    assert standin.peak == 4
    standin.reset()
    assert standin.peak == 0
    _post(standin, _ask("m1", "alone"))
    assert standin.peak == 1


def test_a_stopped_stand_in_closes_the_connections_its_clients_keep_alive() -> None:
    # A client that outlives the stand-in (a Ray actor of a module's cluster) kept its connection, and the handler
    # thread its descriptor, open for as long as the client lived.
    server = StandIn().start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("GET", "/_admin/health")
        reply = conn.getresponse()
        assert reply.status == 200 and reply.read() and not reply.will_close  # (kept alive: HTTP/1.1)
        server.stop()
        assert conn.sock.recv(1) == b""  # the stand-in closed it (before: a timeout, the connection still open)
    finally:
        conn.close()
