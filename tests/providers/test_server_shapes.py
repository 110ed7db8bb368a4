"""Replies as real servers send them (OpenRouter, vLLM, OpenAI, LiteLLM's proxy), replayed by the stand-in on 127.0.0.1
and read by a real llm_probe run: each gives the record a paying user needs (session 74's audit, docs/runners.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.providers import Endpoint, ProviderClient
from clawstore.runners import LlmProbeSpec, RunArtifact, run_llm_probe
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace


def _run(standin: StandIn, client: ProviderClient, tmp_path: Path, *replies: dict[str, Any],
         retries: int = 2) -> RunArtifact:
    standin.script("m1", *replies)
    spec = LlmProbeSpec(case_id="c", requested_model="m1", endpoint=Endpoint(standin.base_url, None),
                        messages=[{"role": "user", "content": "What is 2 + 2?"}], settings={"retries": retries})
    return run_llm_probe(spec, client, tmp_path)


def _completion(message: dict[str, Any], finish_reason: str, usage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"body": {"id": "gen-1", "object": "chat.completion", "model": "m1", **extra,
                     "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                  "finish_reason": finish_reason}], "usage": usage}}


def test_an_error_inside_a_200_after_generation_began_is_a_provider_failure_retried(
        standin: StandIn, client: ProviderClient, tmp_path: Path) -> None:
    """OpenRouter answers 200 once the model started, and reports a failure after that in the body: `error` beside the
    choice, whose finish_reason is "error" and whose content is what came before the failure. Kept, that half answer
    (or an empty one) was the model's outcome: cached and scored, never asked again. It is the provider's failure:
    retried as its inner status says (502), and what the failed attempt was billed is counted."""
    partial = _completion({"content": "The answer is"}, "error",
                          {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15, "cost": 0.0001},
                          error={"code": 502, "message": "Provider disconnected mid-generation"})
    artifact = _run(standin, client, tmp_path, partial, text("4", usage={"cost": 0.0002}))
    assert artifact.status == "success" and artifact.final_output == "4", artifact.error
    assert len(standin.requests) == 2
    usage = artifact.to_json()["usage"]
    assert round(usage["cost_usd"], 6) == 0.0003 and usage["normalized"]["output_tokens"] >= 3 + 1, usage
    retried = [e["metadata"] for e in artifact.trace if e["event_type"] == "runner" and e["name"] == "provider_retry"]
    assert [(r["code"], r["status_code"]) for r in retried] == [("http_error", 502)], retried

    # Its retries used up: a provider_error (a fault, asked again by the next build), never the half answer.
    standin.reset()
    empty = _completion({"content": ""}, "error", {"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12},
                        error={"code": 502, "message": "Provider disconnected"})
    failed = _run(standin, client, tmp_path, partial, empty, partial, retries=2)
    assert failed.status == "provider_error" and failed.final_output is None, failed.status
    assert failed.error is not None and "Provider disconnected" in failed.error.message
    assert failed.error.metadata["status_code"] == 502 and len(standin.requests) == 3


def test_a_finish_reason_error_alone_is_a_provider_failure(standin: StandIn, client: ProviderClient,
                                                           tmp_path: Path) -> None:
    """finish_reason "error" (OpenRouter's normalised reason: "the model finishes the request with an error") without an
    `error` object: the text before it is no answer either."""
    cut = _completion({"content": "The ans"}, "error",
                      {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14})
    artifact = _run(standin, client, tmp_path, cut, text("4"))
    assert artifact.status == "success" and artifact.final_output == "4"
    assert len(standin.requests) == 2


def test_retry_after_ms_is_honoured(standin: StandIn, client: ProviderClient, tmp_path: Path) -> None:
    """OpenAI (and Azure OpenAI) say how long to wait in milliseconds, `retry-after-ms`, which its own SDK reads first:
    claw read only `Retry-After` and came back after its backoff (0.01 s here), into another 429."""
    limited = {"status": 429, "error": "Rate limit reached", "headers": {"retry-after-ms": "1200"}}
    artifact = _run(standin, client, tmp_path, limited, text("4"))
    assert artifact.status == "success"
    first, second = (r["received_at"] for r in standin.requests)
    assert second - first >= 1.15, second - first
    # with both, the finer one decides (as OpenAI's SDK reads them)
    standin.reset()
    both = {"status": 429, "error": "Rate limit reached", "headers": {"retry-after-ms": "300", "Retry-After": "1"}}
    started = time.monotonic()
    assert _run(standin, client, tmp_path, both, text("4")).status == "success"
    first, second = (r["received_at"] for r in standin.requests)
    assert 0.25 <= second - first < 0.9 and time.monotonic() - started < 5


def test_a_reasoning_model_out_of_tokens_is_its_own_empty_answer(standin: StandIn, client: ProviderClient,
                                                                  tmp_path: Path) -> None:
    """vLLM's reasoning parsers give `content: null` when the model spent max_tokens thinking (`reasoning_content`, or
    `reasoning` in newer vLLM and OpenRouter), and OpenAI's refusals `content: null` beside `refusal`. Before, such a
    reply was malformed: a provider_error, retried by every build and paid for again each time (64 completion tokens
    here, every build). It is the model's outcome: invalid/empty_output, cached, its tokens counted."""
    usage = {"prompt_tokens": 12, "completion_tokens": 64, "total_tokens": 76}
    for message in ({"content": None, "reasoning_content": "Let me think about 2 + 2 carefully..."},
                    {"content": None, "reasoning": "Let me think about 2 + 2 carefully..."},
                    {"content": None, "refusal": "I can't help with that."}):
        standin.reset()
        artifact = _run(standin, client, tmp_path, _completion(message, "length", usage))
        assert (artifact.status, artifact.error and artifact.error.code) == ("invalid", "empty_output"), (
            message, artifact.error)
        assert len(standin.requests) == 1
        normalized = artifact.to_json()["usage"]["normalized"]
        assert (normalized["input_tokens"], normalized["output_tokens"]) == (12, 64)
        kept = [e for e in artifact.trace if e["event_type"] == "message" and e.get("role") == "assistant"]
        assert kept and any(k in str(kept[-1]) for k in ("Let me think", "can't help")), kept
    # the choice says why it stopped with no text: its max_tokens spent, or a content filter (Azure OpenAI's)
    for finish in ("length", "content_filter"):
        standin.reset()
        cut = _run(standin, client, tmp_path, _completion({"content": None}, finish, usage))
        assert (cut.status, cut.error and cut.error.code) == ("invalid", "empty_output"), (finish, cut.error)
    # a bare null that says nothing (nothing thought, nothing cut) is still malformed
    standin.reset()
    bare = _run(standin, client, tmp_path, _completion({"content": None}, "stop", usage), retries=0)
    assert bare.status == "provider_error" and "choices[0].message.content" in bare.error.message  # type: ignore[union-attr]


def test_a_402_with_retry_after_is_waited_for_and_one_without_is_final(standin: StandIn, client: ProviderClient,
                                                                       tmp_path: Path) -> None:
    """OpenRouter's 402 for its in-flight spending budget (paid requests running at once, `limit_source:
    openrouter_in_flight_budget`) says `Retry-After`: it passes as they settle, and a build running many at once
    meets it. Before, the 402 failed the run, and `stop_on_runner_error` (on by default) stopped the build there. A
    402 without it (out of credits) stays final: one request, a provider_error."""
    budget = {"status": 402, "retry_after": "1", "body": {"error": {
        "code": 402, "message": "In-flight budget exhausted",
        "metadata": {"limit_source": "openrouter_in_flight_budget"}}}}
    artifact = _run(standin, client, tmp_path, budget, text("4"))
    assert artifact.status == "success" and artifact.final_output == "4", artifact.error
    first, second = (r["received_at"] for r in standin.requests)
    assert second - first >= 0.95, second - first
    standin.reset()
    broke = _run(standin, client, tmp_path, {"status": 402, "error": "Insufficient credits"}, text("4"))
    assert broke.status == "provider_error" and broke.error is not None and broke.error.metadata["status_code"] == 402
    assert not broke.error.retryable and len(standin.requests) == 1


def test_a_build_meeting_the_in_flight_budget_waits_and_goes_on(ws: Workspace, claw: Claw,  # noqa: F811
                                                               standin: StandIn) -> None:
    """The build a user runs (stop_on_runner_error on, as by default): its first request meets OpenRouter's in-flight
    budget. Before, the build stopped there, the other runs skipped (exit 1); it waits a second and runs them all."""
    ws.run_profile(stop_on_runner_error=True)
    standin.script("vendor/m1", {"status": 402, "retry_after": "1", "error": "In-flight budget exhausted"},
                   text("4"))
    code, out, err = claw.build()
    assert code == 0, out + err
    assert sorted(r["model"] for r in standin.requests) == ["vendor/m1"] * 3 + ["vendor/m2"] * 2, standin.requests


def test_an_error_inside_the_choice_is_named(standin: StandIn, client: ProviderClient, tmp_path: Path) -> None:
    """OpenRouter also puts the in-band error inside the choice (`choices[0].error`, finish_reason "error", content
    ""): the run's error says what the provider said, and the status it gave."""
    error = {"code": 502, "message": "This model is currently experiencing high demand.",
             "metadata": {"error_type": "provider_unavailable"}}
    reply = {"body": {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                                   "finish_reason": "error", "error": error}],
                      "usage": {"cost": 0, "is_byok": True}}}
    failed = _run(standin, client, tmp_path, reply, retries=0)
    assert failed.status == "provider_error" and failed.error is not None, failed.error
    assert "high demand" in failed.error.message and failed.error.metadata["status_code"] == 502, failed.error
    assert failed.error.retryable


def test_a_byok_reply_costs_what_the_upstream_provider_charged(standin: StandIn, client: ProviderClient,
                                                               tmp_path: Path) -> None:
    """OpenRouter with the user's own provider key (BYOK): `usage.cost` is OpenRouter's fee (0 while it waives it), what
    the call cost is `cost_details.upstream_inference_cost`, billed to that key. Before, the run cost the fee: a
    known 0.0 USD, a build of such runs "cost spent 0.000000 USD" and `--max-cost` never stopped it."""
    byok = {"prompt_tokens": 1396, "completion_tokens": 41, "total_tokens": 1437, "cost": 0, "is_byok": True,
            "cost_details": {"upstream_inference_cost": 0.0001601, "upstream_inference_prompt_cost": 0.0001396,
                             "upstream_inference_completions_cost": 2.05e-05}}
    artifact = _run(standin, client, tmp_path, _completion({"content": "4"}, "stop", byok))
    assert artifact.status == "success"
    assert artifact.to_json()["usage"]["cost_usd"] == 0.0001601
    # a fee beside it is paid too
    standin.reset()
    fee = {**byok, "cost": 0.00001}
    assert _run(standin, client, tmp_path, _completion({"content": "4"}, "stop", fee)).to_json()["usage"][
        "cost_usd"] == pytest.approx(0.0001701, rel=1e-9)
    # BYOK without the upstream's figure: what the user's key was billed is not said, so the cost is not reported
    # (priced from a declared price, else unknown), never the fee alone
    standin.reset()
    unsaid = {"prompt_tokens": 1396, "completion_tokens": 41, "total_tokens": 1437, "cost": 0.00048, "is_byok": True}
    assert _run(standin, client, tmp_path, _completion({"content": "4"}, "stop", unsaid)).to_json()["usage"][
        "cost_usd"] is None
    # not BYOK (OpenRouter sends `upstream_inference_cost: null` then): the cost is `cost`, as before
    standin.reset()
    paid = {**byok, "cost": 0.0002, "is_byok": False, "cost_details": {"upstream_inference_cost": None}}
    assert _run(standin, client, tmp_path, _completion({"content": "4"}, "stop", paid)).to_json()["usage"][
        "cost_usd"] == 0.0002


def test_vllms_own_error_shape_is_read(standin: StandIn, client: ProviderClient, tmp_path: Path) -> None:
    """vLLM's OpenAI server (before it wrapped errors in `error`) answers a prompt over the model's context with its
    error object as the body: `{"object": "error", "message", "type", "code"}`. The run's error was the body's JSON cut
    at 200 characters; it says the message, the type is kept, and the 400 is not retried (the same prompt would be
    refused again, and paid for where a server bills refusals)."""
    words = ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
             "messages, 1000 in the completion). Please reduce the length of the messages or completion.")
    refusal = {"status": 400, "body": {"object": "error", "message": words, "type": "BadRequestError", "param": None,
                                       "code": 400}}
    failed = _run(standin, client, tmp_path, refusal, text("4"))
    assert failed.status == "provider_error" and failed.error is not None and len(standin.requests) == 1
    assert failed.error.message.endswith(": " + words), failed.error.message
    assert failed.error.provider_code == "BadRequestError" and failed.error.metadata["status_code"] == 400


def test_a_reasoning_models_thoughts_go_back_with_its_tool_calls(standin: StandIn, client: ProviderClient,
                                                                 tmp_path: Path) -> None:
    """A thinking model's tool call carries its reasoning, which the server wants back with the call in the next
    request: Moonshot's and DeepSeek's thinking modes refuse the turn without `reasoning_content` ("thinking is enabled
    but reasoning_content is missing in assistant tool call message at index 1", HTTP 400), and OpenRouter asks for
    `reasoning_details` back (Gemini's thought signatures). Before, claw dropped them: every such tool loop was a
    provider_error at its second turn, its first paid again by every build."""
    details = [{"type": "reasoning.encrypted", "data": "c2lnbmF0dXJl", "id": "tool_1", "format": "google-gemini-v1"}]
    call = {"id": "call_1", "type": "function", "function": {"name": "write_file",
                                                             "arguments": '{"path": "a.txt", "content": "4"}'}}
    thinking = _completion({"content": None, "tool_calls": [call], "reasoning_content": "I should write it.",
                            "reasoning": "I should write it.", "reasoning_details": details}, "tool_calls",
                           {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21})
    standin.script("m1", thinking, text("Done: 4"))
    spec = LlmProbeSpec(case_id="c", requested_model="m1", endpoint=Endpoint(standin.base_url, None),
                        messages=[{"role": "user", "content": "Write 2 + 2 to a.txt."}], tools=["write_file"])
    artifact = run_llm_probe(spec, client, tmp_path)
    assert artifact.status == "success", artifact.error
    sent = [m for m in standin.requests[1]["body"]["messages"] if m["role"] == "assistant"]
    assert sent == [{"role": "assistant", "tool_calls": [call], "reasoning_content": "I should write it.",
                     "reasoning": "I should write it.", "reasoning_details": details}], sent


def test_litellms_cost_header_is_not_a_cost(standin: StandIn, client: ProviderClient, tmp_path: Path) -> None:
    """LiteLLM's proxy prices a call itself and says it in `x-litellm-response-cost`, 0.0 for a model it cannot price
    (a local one; a custom price it did not apply: LiteLLM issues 10155, 13790). Read, that would be a known 0 for a
    cost nobody knows: the header is not read, the run's cost is the usage's (none here: unknown unless priced). A
    guard for that decision (passes on main too)."""
    usage = {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}
    for said in ("0.0", "0.00042"):
        standin.reset()
        reply = {**_completion({"content": "4"}, "stop", usage), "headers": {"x-litellm-response-cost": said}}
        artifact = _run(standin, client, tmp_path, reply)
        assert artifact.status == "success" and artifact.to_json()["usage"]["cost_usd"] is None
