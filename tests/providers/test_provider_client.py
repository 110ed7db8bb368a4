"""ProviderClient against the real stand-in HTTP server on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from clawstore.errors import ClawError
from clawstore.providers import Endpoint, MissingApiKeyError, ProviderClient, ProviderError, Usage
from clawstore.providers.client import parse_retry_after
from clawstore.providers.usage import UNREADABLE_REPLY
from clawstore.testing.standin import StandIn, error, hang, key_fingerprint, malformed, text

KEY = "sk-test-0123456789abcdef"
BODY = {"model": "m1", "messages": [{"role": "user", "content": "hello there"}], "temperature": 0.5}


@pytest.fixture
def endpoint(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> Endpoint:
    monkeypatch.setenv("CLAW_TEST_KEY", KEY)
    return Endpoint(standin.base_url, "CLAW_TEST_KEY")


def test_request_body_and_headers(standin: StandIn, client: ProviderClient, endpoint: Endpoint) -> None:
    standin.script("m1", text("hi back", reasoning="thinking"))
    result = client.chat(endpoint, BODY, timeout=5, retries=0)
    assert result.message["content"] == "hi back"
    assert result.message["reasoning"] == "thinking"
    assert result.attempts == 1
    [request] = standin.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == BODY
    assert request["headers"]["content-type"] == "application/json"
    assert request["headers"]["x-title"] == "clawstore"
    assert request["authorization"] is True
    assert request["key_fingerprint"] == key_fingerprint(KEY)
    meta = result.provider_meta
    assert meta["provider_name"] == "stand-in" and meta["provider_model_id"] == "m1"
    assert meta["request_id"].startswith("req-") and meta["response_id"].startswith("gen-")
    assert meta["finish_reason"] == "stop" and meta["status_code"] == 200


def test_endpoint_without_key_sends_no_authorization(standin: StandIn, client: ProviderClient) -> None:
    client.chat(Endpoint(standin.base_url, None), BODY, timeout=5, retries=0)
    assert standin.requests[0]["authorization"] is False


def test_usage_is_normalised_and_cost_taken_from_provider(standin: StandIn, client: ProviderClient,
                                                          endpoint: Endpoint) -> None:
    raw = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "cost": 0.00042,
           "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 7},
           "completion_tokens_details": {"reasoning_tokens": 12}}
    standin.script("m1", text("ok", usage=raw))
    result = client.chat(endpoint, BODY, timeout=5, retries=0)
    assert result.usage == Usage(input_tokens=120, output_tokens=30, total_tokens=150, reasoning_tokens=12,
                                 cached_tokens=100, cache_write_tokens=7, cost_usd=0.00042)
    assert result.raw_usage == raw


def test_usage_variants_and_sums() -> None:
    top_level = Usage.from_raw({"prompt_tokens": "10", "completion_tokens": 5.0, "reasoning_tokens": 3,
                                "cost": "0.5"})
    assert (top_level.input_tokens, top_level.output_tokens, top_level.total_tokens) == (10, 5, 15)
    assert top_level.reasoning_tokens == 3 and top_level.cost_usd == 0.5
    no_cost = Usage.from_raw({"prompt_tokens": 1, "completion_tokens": 1})
    assert no_cost.cost_usd is None
    assert (no_cost + no_cost).cost_usd is None
    # a call that counted tokens and reported no cost: the other's cost is not the sum's (session 73: it was, 0.5)
    assert (no_cost + top_level).cost_usd is None and (top_level + no_cost).cost_usd is None
    assert (Usage() + top_level).cost_usd == 0.5  # (an error reply that counted nothing: nothing to price)
    assert (no_cost + top_level).total_tokens == 17
    assert Usage.from_raw(None) == Usage() and Usage.from_raw("junk") == Usage()


def test_429_retry_after_seconds_is_honoured(standin: StandIn, client: ProviderClient,
                                             endpoint: Endpoint) -> None:
    standin.script("m1", error(429, "slow down", retry_after=1), text("finally"))
    started = time.monotonic()
    result = client.chat(endpoint, BODY, timeout=5, retries=3)
    waited = time.monotonic() - started
    assert result.message["content"] == "finally"
    assert result.attempts == 2 and len(standin.requests) == 2
    assert 1.0 <= waited < 2.5  # the 10 ms backoff base alone would retry almost at once
    assert result.attempt_log == [{"attempt": 1, "code": "http_error", "status_code": 429,
                                   "wait_seconds": 1.0}]
    gap = standin.requests[1]["received_at"] - standin.requests[0]["received_at"]
    assert gap >= 1.0


def test_retry_after_holds_back_the_clients_other_requests_for_that_model(
        standin: StandIn, client: ProviderClient, endpoint: Endpoint) -> None:
    # Retry-After asks the client to wait, not one request: the others the build sends meanwhile used
    # to go out at once and collect 429s of their own (each counting against the rate limit).
    standin.script("limited", error(429, "slow down", retry_after=1), text("finally"))
    limited = {**BODY, "model": "limited"}
    first = threading.Thread(target=client.chat, args=(endpoint, limited), kwargs={"timeout": 5, "retries": 3})
    first.start()
    while not standin.requests:
        time.sleep(0.01)
    told = standin.requests[0]["received_at"]
    time.sleep(0.2)
    assert client.chat(endpoint, BODY, timeout=5, retries=0).attempts == 1  # another model: at once
    result = client.chat(endpoint, limited, timeout=5, retries=0)
    first.join()
    assert result.attempts == 1 and result.attempt_log == []  # it waited before sending, never refused
    sent = [(request["model"], request["received_at"] - told) for request in standin.requests[1:]]
    assert sent[0][0] == "m1" and sent[0][1] < 0.9, sent
    assert [model for model, _ in sent[1:]] == ["limited", "limited"] and min(t for _, t in sent[1:]) >= 0.95, sent
    started = time.monotonic()
    client.chat(endpoint, limited, timeout=5, retries=0)  # over: no wait
    assert time.monotonic() - started < 0.5


def test_retry_after_is_capped(standin: StandIn, endpoint: Endpoint) -> None:
    standin.script("m1", error(503, retry_after=30), text("ok"))
    with ProviderClient(backoff_base=0.01, retry_after_cap=0.2) as capped:
        started = time.monotonic()
        result = capped.chat(endpoint, BODY, timeout=5, retries=1)
    assert result.attempts == 2
    assert time.monotonic() - started < 2


def test_parse_retry_after_forms() -> None:
    now = time.time()
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(formatdate(now + 10, usegmt=True), now=now) == pytest.approx(10, abs=1)
    assert parse_retry_after(formatdate(now - 10, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_500_is_retried_then_fails_with_usage_counted(standin: StandIn, client: ProviderClient,
                                                      endpoint: Endpoint) -> None:
    spent = {"prompt_tokens": 4, "completion_tokens": 0, "total_tokens": 4, "cost": 0.001}
    standin.script("m1", error(500, "upstream broke", usage=spent))
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=5, retries=2)
    exc = caught.value
    assert len(standin.requests) == 3
    assert (exc.code, exc.status_code, exc.retryable, exc.timed_out, exc.attempts) == (
        "http_error", 500, True, False, 3)
    assert "upstream broke" in exc.message
    assert exc.usage.input_tokens == 12 and exc.cost_usd == pytest.approx(0.003)
    assert [entry["status_code"] for entry in exc.attempt_log] == [500, 500, 500]


def test_an_answer_with_usage_out_of_bounds_is_kept_and_its_usage_unknown(standin: StandIn, client: ProviderClient,
                                                                        endpoint: Endpoint) -> None:
    # a failed attempt's usage is counted, then the answer's own usage says cost "0.5": the call's cost is unknown
    standin.script("m1", error(500, "upstream broke", usage={"prompt_tokens": 4, "cost": 0.001}),
                   text("4", usage={"cost": "0.5", "prompt_tokens": 9}))
    result = client.chat(endpoint, BODY, timeout=5, retries=2)
    assert result.message["content"] == "4" and result.attempts == 2
    assert result.usage.rejected is not None and result.usage.rejected.startswith("usage.cost: expected a finite")
    assert (result.usage.cost_usd, result.usage.cost_source, result.raw_usage) == (None, "unknown", None)
    assert result.usage.input_tokens == 4  # (the failed attempt's: the answer's 9 was not believed)
    assert result.usage.to_json()["usage_rejected"] == result.usage.rejected
    # and a sum that includes it stays unknown, whatever the other side knows
    later = result.usage + Usage(input_tokens=1, cost_usd=0.25)
    assert (later.cost_usd, later.cost_source, later.rejected) == (None, "unknown", result.usage.rejected)


def test_a_malformed_answer_fails_whatever_its_usage(standin: StandIn, client: ProviderClient,
                                                    endpoint: Endpoint) -> None:
    standin.script("m1", text(12345, usage={"cost": "0.5"}))  # type: ignore[arg-type]
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=5, retries=2)
    assert caught.value.code == "invalid_response" and "choices[0].message.content" in caught.value.message
    # answered, so maybe billed: its cost unknown (its usage's cost was not believed), never the 0 of nothing read
    usage = caught.value.usage
    assert (usage.cost_usd, usage.cost_source, usage.rejected) == (None, "unknown", UNREADABLE_REPLY)
    assert len(standin.requests) == 1


def test_a_malformed_answer_that_counted_its_tokens_keeps_them(standin: StandIn, client: ProviderClient,
                                                              endpoint: Endpoint) -> None:
    standin.script("m1", text(12345, usage={"prompt_tokens": 7, "completion_tokens": 3}))  # type: ignore[arg-type]
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=5, retries=2)
    usage = caught.value.usage
    assert caught.value.code == "invalid_response" and usage.rejected is None
    assert (usage.input_tokens, usage.output_tokens) == (7, 3)


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                       status: int) -> None:
    standin.script("m1", error(status, "nope"))
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=5, retries=4)
    assert len(standin.requests) == 1
    assert caught.value.status_code == status and caught.value.retryable is False


@pytest.mark.parametrize("reply", [malformed(), malformed("[1, 2]"), {"body": {"id": "x", "choices": []}},
                                   malformed("[" * 100_000)], ids=["not-json", "list", "no-choices", "deep"])
def test_malformed_response_is_invalid_and_not_retried(standin: StandIn, client: ProviderClient,
                                                       endpoint: Endpoint, reply: dict) -> None:
    standin.script("m1", reply)
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=5, retries=3)
    assert caught.value.code == "invalid_response" and caught.value.retryable is False
    assert len(standin.requests) == 1
    # a 2xx reply that could not be read: what it cost is unknown (a declared price would make 0 tokens $0)
    assert (caught.value.usage.cost_source, caught.value.usage.rejected) == ("unknown", UNREADABLE_REPLY)


def test_openrouter_error_inside_200_uses_inner_status(standin: StandIn, client: ProviderClient,
                                                       endpoint: Endpoint) -> None:
    standin.script("m1", {"body": {"error": {"message": "provider down", "code": 502}}}, text("ok"))
    result = client.chat(endpoint, BODY, timeout=5, retries=1)
    assert result.attempts == 2 and result.attempt_log[0]["status_code"] == 502


def test_hang_times_out_within_the_timeout(standin: StandIn, client: ProviderClient,
                                           endpoint: Endpoint) -> None:
    standin.script("m1", hang())
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=0.4, retries=1)
    elapsed = time.monotonic() - started
    assert caught.value.timed_out and caught.value.code == "timeout" and caught.value.retryable
    assert len(standin.requests) == 2
    assert 0.8 <= elapsed < 2.0


def test_timeout_bounds_the_whole_exchange(standin: StandIn, client: ProviderClient,
                                           endpoint: Endpoint) -> None:
    standin.script("m1", text("a slow but steady answer", drip=0.05))  # ~15 s for the whole body
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=0.5, retries=0)
    assert caught.value.timed_out and time.monotonic() - started < 1.5


def test_missing_key_fails_before_any_request(standin: StandIn, client: ProviderClient,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_ABSENT_KEY", raising=False)
    with pytest.raises(MissingApiKeyError) as caught:
        client.chat(Endpoint(standin.base_url, "CLAW_ABSENT_KEY"), BODY, timeout=5)
    assert isinstance(caught.value, ClawError) and caught.value.exit_code == 2
    assert "CLAW_ABSENT_KEY" in str(caught.value)
    assert standin.requests == []


def test_transport_errors_are_retried(client: ProviderClient) -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProviderError) as caught:
        client.chat(Endpoint(f"http://127.0.0.1:{port}/v1", None), BODY, timeout=2, retries=2)
    assert caught.value.code == "transport_error" and caught.value.attempts == 3


def test_key_never_appears_in_errors(standin: StandIn, client: ProviderClient, endpoint: Endpoint) -> None:
    standin.script("m1", error(401, f"invalid key {KEY}"))
    with pytest.raises(ProviderError) as caught:
        client.chat(endpoint, BODY, timeout=5, retries=0)
    exc = caught.value
    dumped = json.dumps([str(exc), exc.message, exc.metadata])
    assert KEY not in dumped and "[redacted]" in dumped
    assert KEY not in json.dumps(standin.requests)


def test_one_client_serves_many_threads(standin: StandIn, client: ProviderClient,
                                        endpoint: Endpoint) -> None:
    standin.script("*", text("pong", latency=0.02))
    results: list[str] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        for _ in range(4):
            body = {"model": f"m{index % 4}", "messages": [{"role": "user", "content": "ping"}]}
            content = client.chat(endpoint, body, timeout=5, retries=0).message["content"]
            with lock:
                results.append(content)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["pong"] * 64
    assert standin.counts() == {"m0": 16, "m1": 16, "m2": 16, "m3": 16}


def test_close_wakes_a_thread_waiting_to_retry(standin: StandIn, endpoint: Endpoint) -> None:
    standin.script("m1", error(429, retry_after=30))
    client = ProviderClient(backoff_base=0.01)
    failures: list[ProviderError] = []

    def call() -> None:
        try:
            client.chat(endpoint, BODY, timeout=5, retries=3)
        except ProviderError as exc:
            failures.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    client.close()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 2
    assert failures[0].code == "cancelled"


def test_an_echoed_key_is_scrubbed_but_a_trivially_short_one_does_not_mangle_replies(
        standin: StandIn, client: ProviderClient, monkeypatch: pytest.MonkeyPatch) -> None:
    standin.script("m1", text(f"the key is {KEY}, the task is done"))
    monkeypatch.setenv("CLAW_TEST_KEY", KEY)
    result = client.chat(Endpoint(standin.base_url, "CLAW_TEST_KEY"), BODY, timeout=5, retries=0)
    assert result.message["content"] == "the key is [redacted], the task is done"
    monkeypatch.setenv("CLAW_TEST_KEY", "k")
    result = client.chat(Endpoint(standin.base_url, "CLAW_TEST_KEY"), BODY, timeout=5, retries=0)
    assert result.message["content"] == f"the key is {KEY}, the task is done"


class _RecordingPacer:
    """A build's pacer as the client sees it: records what it is told, waits like a sleep."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def pause(self, seconds: float, cancelled: threading.Event) -> bool:
        self.calls.append(("pause",))
        return not cancelled.wait(seconds)

    def throttled(self, seconds: float, retry_after_s: float | None, sent_at: float, *, halve: bool) -> None:
        self.calls.append(("throttled", f"{retry_after_s}", f"halve={halve}"))

    def succeeded(self) -> None:
        self.calls.append(("succeeded",))


def test_a_rate_limit_wait_goes_through_the_threads_pacer_and_a_server_error_backoff_does_not(
        standin: StandIn, client: ProviderClient, endpoint: Endpoint) -> None:
    from clawstore.providers.pacing import paced_by

    standin.script("m1", error(429, retry_after=0.05), error(429), error(503, retry_after=0.05), error(500),
                   text("ok"))
    pacer = _RecordingPacer()
    with paced_by(pacer):
        assert client.chat(endpoint, BODY, timeout=5, retries=4).attempts == 5
    assert pacer.calls == [("throttled", "0.05", "halve=True"), ("pause",),  # waits, slot given back
                           ("throttled", "None", "halve=True"), ("pause",),  # a 429 without Retry-After too
                           ("throttled", "0.05", "halve=False"), ("pause",),  # a Retry-After holds, never halves
                           ("succeeded",)]  # the 500's backoff keeps the slot: not the pacer's business


def test_each_request_in_flight_has_an_httpx_client_of_its_own_and_gives_it_back(standin: StandIn,
                                                                                  endpoint: Endpoint) -> None:
    standin.script("*", text("pong", latency=0.05))
    start = threading.Barrier(6)

    def worker() -> None:
        start.wait()
        client.chat(endpoint, BODY, timeout=5, retries=0)

    with ProviderClient() as client:
        threads = [threading.Thread(target=worker) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        at_once = standin.peak
        made = len(client._clients)
        for _ in range(10):  # one after another: the same client (and its kept-alive connection) each time
            client.chat(endpoint, BODY, timeout=5, retries=0)
        assert len(client._clients) == made
    assert 2 <= at_once <= made <= 6
    assert len(standin.requests) == 16


class _GzipHandler(BaseHTTPRequestHandler):
    """A provider that compresses its replies (as real ones do for `Accept-Encoding: gzip`)."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet test output
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        self.rfile.read(int(self.headers["Content-Length"]))
        reply = {"id": "gen-1", "model": "m1", "choices": [{"message": {"role": "assistant", "content": "zipped"},
                                                            "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        payload = gzip.compress(json.dumps(reply).encode())
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_a_compressed_reply_is_read_once_decompressed(client: ProviderClient) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GzipHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = client.chat(Endpoint(f"http://127.0.0.1:{server.server_address[1]}/v1", None), BODY, timeout=5,
                             retries=0)
    finally:
        server.shutdown()
        server.server_close()
    assert result.message["content"] == "zipped"
    assert result.usage.total_tokens == 4


class _CookieHandler(BaseHTTPRequestHandler):
    """Sets a cookie on its first reply; records the Cookie header of every request."""

    seen: list[str | None] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(self.headers.get("Cookie"))
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if len(type(self).seen) == 1:
            self.send_header("Set-Cookie", "session=abc; Path=/")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_a_cookie_a_reply_sets_is_sent_back_and_a_reply_without_one_keeps_it(client: ProviderClient) -> None:
    # The client reads a reply's cookies only when it has a Set-Cookie header (a saving per request): what it
    # keeps and sends must stay what httpx's own cookie handling does.
    _CookieHandler.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CookieHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = Endpoint(f"http://127.0.0.1:{server.server_address[1]}/v1", None)
    try:
        for _ in range(3):  # one thread: each request leases the same client
            assert client.chat(endpoint, BODY, timeout=5, retries=0).message["content"] == "ok"
    finally:
        server.shutdown()
        server.server_close()
    assert _CookieHandler.seen == [None, "session=abc", "session=abc"]


def test_the_request_sent_is_the_one_httpx_builds_header_for_header(client: ProviderClient,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The client builds its request without httpx's per-request header merge: what goes on the wire must stay
    # byte for byte what httpx.Client.build_request would have sent (order included), for two requests in a row.
    monkeypatch.setenv("CLAW_TEST_KEY", KEY)
    heads: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while len(heads) < 2:
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, data = data.split(b"\r\n\r\n", 1)
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                heads.append(head)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(reply)).encode() + b"\r\n\r\n" + reply)

    threading.Thread(target=serve, daemon=True).start()
    base = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    try:
        for _ in range(2):
            client.chat(Endpoint(base, "CLAW_TEST_KEY"), BODY, timeout=5, retries=0)
    finally:
        listener.close()
    payload = json.dumps(BODY, ensure_ascii=False).encode()
    with httpx.Client() as plain:
        expected = plain.build_request("POST", f"{base}/chat/completions", content=payload, headers={
            "Content-Type": "application/json", "X-Title": "clawstore", "Authorization": f"Bearer {KEY}"})
    wire = [b"%s: %s" % pair for pair in expected.headers.raw]
    assert heads == [b"\r\n".join([b"POST /v1/chat/completions HTTP/1.1", *wire])] * 2
