"""Judge contract parsing, request building, and iterations against a real HTTP server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from clawstore.errors import ClawError, ConfigError
from clawstore.evaluate import (
    JudgeContractError,
    JudgeIteration,
    build_judge_request,
    parse_judge_response,
    run_judge_iteration,
)
from clawstore.providers import Endpoint, ProviderClient

from .helpers import judge_reply

VALID = json.dumps(judge_reply(7.5, {"spark": 3}, summary="Solid work."))

# --- contract ---------------------------------------------------------------------------------


def test_parse_plain_fenced_and_prose() -> None:
    plain = parse_judge_response(VALID)
    assert plain.overall_score == 7.5 and plain.dimensions["spark"] == 3.0 and plain.summary == "Solid work."
    assert plain.evidence["task"] == ["task fact"] and plain.overall_evidence == ["decisive fact"]
    fenced = parse_judge_response(f"Here is my verdict:\n```json\n{VALID}\n```\nThanks!")
    assert fenced == plain
    prose = parse_judge_response(f"I considered {{the trace}} carefully. {VALID} That is all.")
    assert prose == plain
    extra = json.loads(VALID)
    extra["confidence"] = "high"
    extra["dimensions"]["task"]["rationale"] = "ignored"
    assert parse_judge_response(json.dumps(extra)) == plain


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("summary"), "summary is missing"),
        (lambda d: d.update(summary="  "), "summary must be a non-empty string"),
        (lambda d: d["dimensions"].pop("autonomy"), "dimensions.autonomy is missing"),
        (lambda d: d["dimensions"]["task"].update(score=11), "dimensions.task.score must be within 0..10, got 11"),
        (lambda d: d["dimensions"]["spark"].update(score=-1), "dimensions.spark.score must be within 0..10"),
        (lambda d: d["dimensions"]["process"].update(score="7"), "dimensions.process.score must be a number"),
        (lambda d: d["dimensions"]["process"].update(evidence="x"), "dimensions.process.evidence must be a list"),
        (lambda d: d["overall"].pop("score"), "overall.score is missing"),
        (lambda d: d["overall"].update(score=10.5), "overall.score must be within 0..10"),
        (lambda d: d.pop("overall"), "overall is missing"),
    ],
)
def test_contract_violations_name_the_field(mutate: Callable[[dict], Any], message: str) -> None:
    data = json.loads(VALID)
    mutate(data)
    with pytest.raises(JudgeContractError, match=message.replace(".", r"\.")):
        parse_judge_response(json.dumps(data))


def test_no_json_at_all() -> None:
    with pytest.raises(JudgeContractError, match="no JSON object"):
        parse_judge_response("I think it deserves a 7.")
    with pytest.raises(JudgeContractError, match="no content"):
        parse_judge_response("   ")


def test_empty_evidence_is_a_warning_not_a_failure() -> None:
    data = json.loads(VALID)
    data["dimensions"]["spark"]["evidence"] = []
    scores = parse_judge_response(json.dumps(data))
    assert scores.warnings == ["dimensions.spark.evidence is empty"]


# --- request ----------------------------------------------------------------------------------


def test_build_request_model_resolution_and_options() -> None:
    body = build_judge_request(
        {"judge_id": "j1", "type": "llm_probe", "model": "openai/gpt-x",
         "request_options": {"reasoning": {"effort": "none"}, "max_tokens": 900}},
        "SYSTEM", "USER", repetition=2,
    )
    assert body["model"] == "openai/gpt-x" and body["temperature"] == 0.0
    assert body["messages"] == [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "USER"}]
    assert body["reasoning"] == {"effort": "none"} and body["max_tokens"] == 900
    assert body["metadata"] == {"judge_id": "j1", "judge_repetition": "2"}
    assert build_judge_request({"judge_id": "j", "judge_model": "a/b", "model_id": "c"}, "s", "u", 0)["model"] == "a/b"
    assert build_judge_request({"judge_id": "j", "model_id": "c"}, "s", "u", 0)["model"] == "c"
    assert build_judge_request({"judge_id": "fallback"}, "s", "u", 0)["model"] == "fallback"
    hot = build_judge_request({"judge_id": "j", "request_options": {"temperature": 0.7}}, "s", "u", 0)
    assert hot["temperature"] == 0.7
    with pytest.raises(ConfigError, match="request_options may not set 'messages'"):
        build_judge_request({"judge_id": "j", "request_options": {"messages": []}}, "s", "u", 0)


def test_build_request_from_config_model() -> None:
    from clawstore.config.models import JudgeConfig

    judge = JudgeConfig.model_validate({"judge_id": "main", "type": "llm_probe", "model": "openai/gpt-5.4-mini",
                                        "request_options": {"verbosity": "low"}})
    body = build_judge_request(judge, "s", "u", 0)
    assert body["model"] == "openai/gpt-5.4-mini" and body["verbosity"] == "low"


# --- iterations with a scripted chat callable -------------------------------------------------


class Scripted:
    """A chat callable returning the given contents in order (a ChatResult-like object each)."""

    def __init__(self, contents: list[str], usage: dict[str, Any] | None = None):
        self.contents = list(contents)
        self.bodies: list[dict] = []
        self.usage = usage or {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.001}

    def __call__(self, body: dict) -> Any:
        self.bodies.append(body)
        content = self.contents.pop(0)
        return type("Result", (), {"message": {"role": "assistant", "content": content}, "usage": self.usage})()


def test_invalid_then_success_is_retried_within_attempts() -> None:
    chat = Scripted(["no json here", json.dumps(judge_reply(12)), VALID])
    it = run_judge_iteration(chat, {"model": "judge/m"}, attempts=3, judge_run_id="r", repetition=1)
    assert it.status == "success" and it.scores and it.scores.overall_score == 7.5
    assert [a["status"] for a in it.attempts] == ["invalid", "invalid", "success"]
    assert "score must be within 0..10, got 12" in it.attempts[1]["error"]
    assert it.usage["input_tokens"] == 300 and it.usage["cost_usd"] == pytest.approx(0.003)
    assert any("succeeded after 2 retried attempt(s)" in w for w in it.warnings)
    assert len(chat.bodies) == 3 and it.judge_model == "judge/m" and not it.infrastructure_failure
    again = JudgeIteration.from_dict(json.loads(json.dumps(it.to_dict())))
    assert again.to_dict() == it.to_dict()


def test_all_attempts_invalid() -> None:
    it = run_judge_iteration(Scripted(["nope"] * 3), {}, attempts=3)
    assert it.status == "invalid" and it.scores is None and len(it.attempts) == 3
    assert not it.infrastructure_failure


def test_non_provider_exception_is_failed_and_claw_errors_propagate() -> None:
    def broken(body: dict) -> Any:
        raise RuntimeError("bug in adapter")

    it = run_judge_iteration(broken, {}, attempts=3)
    assert it.status == "failed" and it.infrastructure_failure and len(it.attempts) == 1

    def no_key(body: dict) -> Any:
        raise ClawError("environment variable X is not set")

    with pytest.raises(ClawError):
        run_judge_iteration(no_key, {}, attempts=3)


def test_a_non_provider_exception_leaves_the_repetitions_cost_unknown_not_a_priced_zero() -> None:
    """Anything its call raised other than a provider's error may have come after the request left (a Ray worker's
    error of any type): its cost is unknown, as an llm_probe run's is (runners/llm_probe.py), never its 0 tokens at
    the judge's declared prices (before session 80: `cost_usd` 0.0, `priced`)."""
    from clawstore.builder.eval_layer import judge_metrics
    from clawstore.providers.usage import counts_alone_unknown
    from clawstore.runners.pricing import record_cost

    def broken(body: dict) -> Any:
        raise RuntimeError("the worker's own error")

    usage = run_judge_iteration(broken, {}, attempts=3).usage
    assert usage["cost_usd"] is None and usage.get("cost_source") == "unknown" and not usage.get("nothing_sent"), usage
    for prices, cost, source in (({"input": 1.0, "output": 2.0}, None, "unknown"), ({"input": 0, "output": 0}, 0.0,
                                                                                    "priced")):  # (free: a known 0)
        metrics = record_cost(judge_metrics(usage, 0.1), {"pricing": prices}, usage.get("cost_source"),
                              counts_alone=counts_alone_unknown(usage))
        assert (metrics["cost_usd"], metrics["cost_source"]) == (cost, source), metrics


def test_stored_attempts_are_redacted() -> None:
    secret = "sk-or-v1-" + "f" * 40
    reply = json.loads(VALID)
    reply["summary"] = f"The run printed {secret} to the log."
    it = run_judge_iteration(Scripted(["leaked " + secret, json.dumps(reply)]), {}, attempts=2)
    assert it.status == "success"
    assert secret not in json.dumps(it.to_dict())
    assert "[REDACTED]" in it.scores.summary


# --- iterations against a real OpenAI-compatible server on 127.0.0.1 --------------------------


class Server:
    def __init__(self) -> None:
        self.replies: list[tuple[int, Any, float]] = []  # (status, body, delay)
        self.requests: list[dict] = []


@pytest.fixture
def server() -> Iterator[tuple[Server, str]]:
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server API
            length = int(self.headers.get("Content-Length", "0"))
            state.requests.append(json.loads(self.rfile.read(length)))
            status, body, delay = state.replies.pop(0) if state.replies else (500, {"error": "none left"}, 0)
            time.sleep(delay)
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def completion(content: str, prompt_tokens: int = 50, cost: float = 0.002) -> dict:
    return {"id": "cmpl-1", "model": "judge-model",
            "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 10, "cost": cost}}


@pytest.fixture
def judge_chat(server: tuple[Server, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict], Any]]:
    monkeypatch.setenv("CLAW_TEST_JUDGE_KEY", "test-key-value")
    endpoint = Endpoint(server[1], "CLAW_TEST_JUDGE_KEY")
    client = ProviderClient(backoff_base=0.001, backoff_cap=0.01)
    # A reply slower than the timeout is retried and takes the next scripted reply: on a loaded machine 0.5 s was
    # missed (one iteration's usage counted once, 50 != 100), so only the timeout test asks for a short one
    yield lambda body, timeout=10.0: client.chat(endpoint, body, timeout=timeout, retries=1)
    client.close()


def test_real_server_invalid_then_fenced_success(server: tuple[Server, str], judge_chat: Callable) -> None:
    state, _ = server
    # (the first reply slower than the 0.5 s the fixture once gave every request: not retried, both usages counted)
    state.replies = [(200, completion("Let me think... score 7"), 0.7), (200, completion(f"```json\n{VALID}\n```"), 0)]
    body = build_judge_request({"judge_id": "j", "model": "judge-model"}, "SYS", "USER", 0)
    it = run_judge_iteration(judge_chat, body, attempts=3)
    assert it.status == "success" and it.scores and it.scores.overall_score == 7.5
    assert it.usage["input_tokens"] == 100 and it.usage["cost_usd"] == pytest.approx(0.004)
    assert [r["model"] for r in state.requests] == ["judge-model", "judge-model"]
    assert state.requests[0]["messages"][1]["content"] == "USER"


def test_real_server_provider_error_is_not_invalid(server: tuple[Server, str], judge_chat: Callable) -> None:
    state, _ = server
    state.replies = [(503, {"error": {"message": "overloaded"}}, 0), (503, {"error": {"message": "overloaded"}}, 0)]
    it = run_judge_iteration(judge_chat, {"model": "m", "messages": []}, attempts=3)
    assert it.status == "provider_error" and it.infrastructure_failure and it.scores is None
    assert len(state.requests) == 2  # the client's own retry; the iteration does not multiply it
    assert len(it.attempts) == 1


def test_real_server_timeout(server: tuple[Server, str], judge_chat: Callable) -> None:
    state, _ = server
    state.replies = [(200, completion(VALID), 1.5), (200, completion(VALID), 1.5)]
    started = time.monotonic()
    it = run_judge_iteration(lambda body: judge_chat(body, timeout=0.5), {"model": "m", "messages": []}, attempts=3)
    assert it.status == "timed_out" and it.infrastructure_failure
    assert time.monotonic() - started < 3.0
