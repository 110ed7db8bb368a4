"""The OpenAI Batch API client against the stand-in's: files within limits, every line checked as a reply."""

from __future__ import annotations

import json
import time

import pytest

from clawstore.providers.batch_api import BatchApi, read_lines, request_line, split_files
from clawstore.providers.client import ChatResult
from clawstore.providers.endpoint import Endpoint
from clawstore.testing.standin import StandIn, error, text


def body(prompt: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": prompt}]}


def test_files_stay_within_the_request_and_byte_limits() -> None:
    lines = [request_line(f"id-{i}", body("x" * 50)) for i in range(10)]
    size = len(lines[0])
    assert [len(f) for f in split_files(lines, max_requests=4)] == [4, 4, 2]
    assert [len(f) for f in split_files(lines, max_bytes=3 * size)] == [3, 3, 3, 1]
    assert all(sum(map(len, f)) <= 3 * size for f in split_files(lines, max_bytes=3 * size))
    assert [len(f) for f in split_files(lines[:1], max_bytes=1)] == [1]  # alone: the provider says no


def line(custom_id: str, status: int, payload: object) -> bytes:
    return json.dumps({"custom_id": custom_id, "response": {"status_code": status, "body": payload}}).encode()


def completion(content: object, usage: dict[str, object]) -> dict[str, object]:
    return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage, "model": "m"}


def test_each_line_is_checked_as_a_synchronous_reply_is() -> None:
    data = b"\n".join([
        line("good", 200, completion("fine", {"prompt_tokens": 3, "completion_tokens": 2, "cost": 0.001})),
        line("huge", 200, completion("fine", {"completion_tokens": 1e30})),
        line("number", 200, completion(7, {})),
        line("server", 500, {"error": {"message": "busy"}}),
        json.dumps({"custom_id": "late", "response": None,
                    "error": {"code": "batch_expired", "message": "not run"}}).encode(),
        b"{not json",
    ])
    answers = {a.custom_id: a for a in read_lines(data, "http://127.0.0.1:9/v1/chat/completions", None)}
    assert set(answers) == {"good", "huge", "number", "server", "late"}
    good = answers["good"]
    assert isinstance(good.result, ChatResult) and good.result.usage.cost_usd == 0.001 and not good.retry
    # malformed: the same invalid_response as a direct reply, not sent again
    assert answers["number"].error is not None and answers["number"].error.code == "invalid_response"
    assert not answers["number"].retry and "choices[0].message.content" in str(answers["number"].error)
    # a good answer whose usage breaks the bounds: kept as a direct one is, its usage not believed
    huge = answers["huge"]
    assert huge.error is None and huge.result is not None and huge.result.message["content"] == "fine"
    assert huge.result.usage.rejected is not None and huge.result.usage.rejected.startswith("usage.completion_tokens")
    assert (huge.result.usage.output_tokens, huge.result.usage.cost_source) == (0, "unknown") and not huge.retry
    assert answers["server"].retry and answers["late"].retry and "batch_expired" in str(answers["late"].error)


def test_a_round_trip_through_the_stand_in() -> None:
    with StandIn() as server, BatchApi(Endpoint(server.base_url, None)) as api:
        server.script("m", text("hello"), match="hi")
        server.script("m", error(429), match="busy")
        server.batch_settings(delay=0.2)
        data = request_line("a", body("hi")) + request_line("b", body("busy"))
        created = api.create(api.upload(data), {"claw_batch": "x"})
        assert created["status"] == "in_progress" and created["request_counts"]["total"] == 2
        assert api.find(created["input_file_id"])["id"] == created["id"]
        time.sleep(0.25)
        done = api.get(created["id"])
        assert done["status"] == "completed" and done["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
        answers = {a.custom_id: a for a in read_lines(api.content(done["output_file_id"]), api.chat_url, None)}
        answers.update({a.custom_id: a for a in read_lines(api.content(done["error_file_id"]), api.chat_url, None)})
        assert answers["a"].result is not None and answers["a"].result.message["content"] == "hello"
        assert answers["b"].retry  # a 429 inside a batch: sent again in the next one
        assert server.requests == []  # nothing went to /chat/completions


def test_an_unknown_batch_is_a_provider_error_naming_it() -> None:
    from clawstore.providers.errors import ProviderError

    with StandIn() as server, BatchApi(Endpoint(server.base_url, None), backoff_s=0.0) as api:
        with pytest.raises(ProviderError) as caught:
            api.get("batch_nope")
    assert caught.value.status_code == 404 and "batch_nope" in str(caught.value)


def test_a_refusal_echoing_the_key_past_the_excerpts_end_leaves_no_part_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch control request's refusal is shown by its first 200 characters: the key was scrubbed from those 200
    only, so a key the body echoed across the 200th character was no longer whole there and its head was kept in the
    error (printed, and kept in the build's log)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from clawstore.providers.errors import ProviderError

    key = "sk-or-v1-" + "0123456789abcdef" * 4
    refusal = json.dumps({"error": {"message": "x" * 130 + f" Incorrect API key provided: {key}"}}).encode()

    class Refuses(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(refusal)))
            self.end_headers()
            self.wfile.write(refusal)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    monkeypatch.setenv("CLAW_TEST_BATCH_KEY", key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with BatchApi(Endpoint(url, "CLAW_TEST_BATCH_KEY"), backoff_s=0.0) as api, \
                pytest.raises(ProviderError) as caught:
            api.upload(request_line("a", body("hi")))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    shown = str(caught.value)
    assert caught.value.status_code == 401 and "Incorrect API key" in shown
    assert key[:12] not in shown, shown


@pytest.mark.parametrize("retry_after", [None, "0"], ids=["final", "with_retry_after"])
def test_a_402_is_final_without_retry_after_and_a_wait_with_one(retry_after: str | None) -> None:
    """Out of credit (a 402 with no `Retry-After`) is final: asked once, and the build stops sending to the endpoint
    (builder/refused.py). A 402 that says when to come back is a wait, as for a chat request: asked again. Before
    session 76 every 402 to the Batch API was final, one with `Retry-After` too (a build would stop on a wait)."""
    from clawstore.builder.refused import is_final_402
    from clawstore.providers.batch_api import CONTROL_ATTEMPTS
    from clawstore.providers.errors import ProviderError

    with StandIn() as server, BatchApi(Endpoint(server.base_url, None), backoff_s=0.0) as api:
        server.batch_settings(refuse_after=0, refusal_retry_after=retry_after)
        with pytest.raises(ProviderError) as caught:
            api.upload(request_line("a", {"model": "m", "messages": []}))
        refused = server.batch_stats()["refused"]
    assert is_final_402(caught.value) is (retry_after is None)
    assert refused == (1 if retry_after is None else CONTROL_ATTEMPTS)
    assert caught.value.message.endswith(": Insufficient credits (stand-in batch refusal)"), caught.value.message
