"""A judge request whose reply counts implausibly few prompt tokens for what it was sent (a server that cut the
transcript to fit its context: Ollama past num_ctx) is warned in the judgement, never failed. Real stand-in server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from clawstore.evaluate import run_judge_iteration
from clawstore.providers import Endpoint, ProviderClient
from clawstore.testing.standin import StandIn, text

from .helpers import judge_reply

TRANSCRIPT = ("The agent listed the directory, read the report, and summarised its three findings for the user. "
              * 205)[:20_000]
BODY = {"model": "judge/j1", "messages": [{"role": "system", "content": "You are a strict judge."},
                                          {"role": "user", "content": TRANSCRIPT}]}


@pytest.fixture
def judge_chat(standin: StandIn, client: ProviderClient) -> Iterator[Callable[[dict[str, Any]], Any]]:
    endpoint = Endpoint(standin.base_url, None)
    yield lambda body: client.chat(endpoint, body, timeout=10.0, retries=0)


def verdict(**extra: Any) -> dict[str, Any]:
    return text(json.dumps(judge_reply(6.0)), **extra)


def test_a_transcript_counted_as_a_few_tokens_is_warned(standin: StandIn, judge_chat: Callable) -> None:
    standin.script("judge/j1", verdict(usage={"prompt_tokens": 2048}))
    iteration = run_judge_iteration(judge_chat, BODY)
    assert iteration.status == "success" and iteration.scores is not None  # warned, not failed
    [warning] = [w for w in iteration.warnings if "prompt tokens" in w]
    assert warning.startswith("attempt 1: the server counted 2048 prompt tokens for ") and "num_ctx" in warning


@pytest.mark.parametrize("usage", [None, {"prompt_tokens": None}])  # its own count; none at all
def test_a_plausible_or_missing_count_is_not_warned(standin: StandIn, judge_chat: Callable,
                                                    usage: dict[str, Any] | None) -> None:
    standin.script("judge/j1", verdict(**({"usage": usage} if usage else {})))
    iteration = run_judge_iteration(judge_chat, BODY)
    assert iteration.status == "success"
    assert not [w for w in iteration.warnings if "prompt tokens" in w], iteration.warnings
