"""A server that answers a prompt it cut (Ollama past num_ctx, llama.cpp with --context-shift) is caught by its own
prompt counts: they fall as the conversation grows (incomplete/prompt_truncated_by_server, no further call), or one
call's count is implausibly small for what it sent (a warning). Real stand-in server, real sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawstore.providers import Endpoint, ProviderClient
from clawstore.runners import RunArtifact, run_llm_probe
from clawstore.testing.standin import StandIn, text, tool_call
from tests.runners.test_llm_probe import FILE_TOOLS, events, spec

# 20,000 characters of ordinary prose (the stand-in counts its words: about 3,600, 5.5 characters a token)
PROSE = ("The committee reviewed every budget line before the vote, and the minutes record each objection. "
         * 205)[:20_000]


@pytest.fixture
def endpoint(standin: StandIn) -> Endpoint:
    return Endpoint(standin.base_url, None)


def loop(prompts: list[int | None]) -> list[dict[str, Any]]:
    """Tool calls writing a.txt, b.txt, … then an answer, the n-th reply reporting `prompts[n]` prompt tokens (None:
    a reply whose usage counts no prompt tokens)."""
    replies = [tool_call("write_file", {"path": f"{chr(97 + n)}.txt", "content": "x"}) for n in range(len(prompts) - 1)]
    replies.append(text("done"))
    for reply, prompt in zip(replies, prompts, strict=True):
        reply["usage"] = {"prompt_tokens": prompt}
    return replies


def run(standin: StandIn, client: ProviderClient, endpoint: Endpoint, tmp_path: Path, prompts: list[int | None],
        **kw: Any) -> RunArtifact:
    standin.script("m1", *loop(prompts))
    return run_llm_probe(spec(endpoint, FILE_TOOLS, **kw), client, tmp_path)


def test_a_third_call_counting_fewer_prompt_tokens_than_the_second_ends_the_run(
        standin: StandIn, client: ProviderClient, endpoint: Endpoint, tmp_path: Path) -> None:
    # Ollama at num_ctx 2048: the third request outgrew it and the server kept num_ctx/2+2 tokens of it
    artifact = run(standin, client, endpoint, tmp_path, [1500, 1900, 1026, 1100])
    assert artifact.status == "incomplete", artifact.error
    assert artifact.error is not None and artifact.error.code == "prompt_truncated_by_server"
    assert artifact.error.error_type == "output_error"
    assert "call 3 reported 1026 prompt tokens" in artifact.error.message
    assert "call 2's 1900" in artifact.error.message and "num_ctx" in artifact.error.message
    assert len(standin.requests) == 3  # nothing more paid for a cut conversation
    # the reply that showed it is recorded; its tool call never ran
    assert [c["tool_name"] for c in events(artifact, "tool_call")] == ["write_file"] * 3
    assert len(events(artifact, "tool_result")) == 2 and not (tmp_path / "work/c.txt").exists()
    assert artifact.usage.input_tokens == 1500 + 1900 + 1026


def test_a_count_stuck_at_the_context_size_is_a_cut(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                                    tmp_path: Path) -> None:
    # older Ollama cut to exactly num_ctx: the count stops growing though the conversation does
    artifact = run(standin, client, endpoint, tmp_path, [1900, 2048, 2048, 2048])
    assert artifact.status == "incomplete" and artifact.error is not None
    assert artifact.error.code == "prompt_truncated_by_server" and len(standin.requests) == 3


@pytest.mark.parametrize("prompts", [
    [1500, 1900, 2300, 2700],  # a conversation growing as it should
    [1500, 1900, None, 2700],  # a reply that counts no prompt tokens: unknown, nothing to compare
    [1500, 40, 45, 50],  # a server counting only what it did not hold in cache (Ollama 0.30): the appended turn
])
def test_no_cut_is_seen_where_none_is_certain(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                              tmp_path: Path, prompts: list[int | None]) -> None:
    artifact = run(standin, client, endpoint, tmp_path, prompts)
    assert artifact.status == "success", artifact.error
    assert len(standin.requests) == 4 and not events(artifact, "runner")
    assert "warnings" not in artifact.to_json()["runner_metadata"]


def test_the_stand_ins_own_counts_grow_with_the_conversation(standin: StandIn, client: ProviderClient,
                                                             endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", *[tool_call("write_file", {"path": f"{n}.txt", "content": "x"}) for n in range(3)],
                   text("done"))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS), client, tmp_path)
    assert artifact.status == "success" and not events(artifact, "runner")


def test_a_long_prompt_counted_as_a_few_tokens_is_warned(standin: StandIn, client: ProviderClient,
                                                         endpoint: Endpoint, tmp_path: Path) -> None:
    messages = [{"role": "user", "content": PROSE}]
    standin.script("m1", text("short", usage={"prompt_tokens": 2048}))
    artifact = run_llm_probe(spec(endpoint, messages=messages), client, tmp_path)
    assert artifact.status == "success"  # a heuristic: warned, never a status
    [warning] = events(artifact, "runner")
    assert warning["name"] == "prompt_tokens_implausible"
    assert "2048 prompt tokens for" in warning["detail"] and "num_ctx" in warning["detail"]
    assert artifact.to_json()["runner_metadata"]["warnings"] == [warning["detail"]]


def test_a_long_prompt_counted_plausibly_is_not_warned(standin: StandIn, client: ProviderClient,
                                                       endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", text("short"))  # the stand-in's own count: its words
    artifact = run_llm_probe(spec(endpoint, messages=[{"role": "user", "content": PROSE}]), client, tmp_path)
    assert artifact.status == "success" and not events(artifact, "runner")
    assert standin.requests[0]["body"]["messages"][0]["content"] == PROSE


def test_calls_answered_by_another_model_are_not_compared(standin: StandIn, client: ProviderClient,
                                                          endpoint: Endpoint, tmp_path: Path) -> None:
    # a router (openrouter/auto, a fallback) may answer each call with another model: another tokenizer's count
    replies = loop([1500, 1900, 1026, 1100])
    replies[2]["model"] = replies[3]["model"] = "vendor/other-model"
    standin.script("m1", *replies)
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS), client, tmp_path)
    assert artifact.status == "success", artifact.error
    assert len(standin.requests) == 4
