"""Signs in a server's own `usage` that it answered a prompt it cut: Ollama's OpenAI-compatible endpoint (and
llama.cpp's server with `--context-shift`) answer HTTP 200 to a prompt longer than the model's context after dropping
part of it, and only their log says so. What is certain and what is a heuristic: docs/runners.md ("A server that cuts
the prompt")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

TRUNCATED_CODE = "prompt_truncated_by_server"
# A server that counts only the prompt tokens it did not hold in its cache (Ollama before mid-2024, and 0.30 until its
# llama-server counts were fixed, reported no cached count beside them) answers a tool loop's next call with the tokens
# appended since the previous one: a count at most the bytes appended (no tokenizer makes more tokens than UTF-8 bytes)
# plus each message's template tokens and the tail it re-reads. A smaller count is never taken for a cut.
TEMPLATE_TOKENS_PER_MESSAGE = 32
REREAD_TOKENS = 256
# The single-call heuristic: at least this many characters sent (runs of one character counted once, so a separator
# line or an indentation run a tokenizer packs into one token cannot fire it) and more than this many per reported
# token. Natural text is 3 to 5 characters a token for real tokenizers (200k-word vocabularies included), code 2 to 4,
# CJK text 1 to 2, a byte vocabulary (the realserver tier's model) 1; the stand-in counts words, 5 to 6 in English.
# Text that repeats one long word could pass 8: the warning is a heuristic, never a status.
DENSE_MIN_CHARS = 8_000
DENSE_CHARS_PER_TOKEN = 8
FIX = ("Ollama: raise OLLAMA_CONTEXT_LENGTH or the model's num_ctx (its OpenAI endpoint ignores a request's); "
       "llama.cpp: a larger -c, and no --context-shift")
DENSE_MARK = "denser than any natural text"
_RUNS = re.compile(r"(.)\1+", re.DOTALL)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def prompt_counts(raw_usage: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(the prompt tokens a reply's own `usage` reports, the most the prompt may have held): the second adds the cached
    and cache-write counts a server may report apart from its prompt count (Anthropic's way; OpenAI's and OpenRouter's
    count them in it, so there it over-counts, which only makes a cut harder to see). None when it reports none."""
    if not isinstance(raw_usage, Mapping):
        return None
    prompt = _count(raw_usage.get("prompt_tokens", raw_usage.get("input_tokens")))
    if prompt is None:
        return None
    details = raw_usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    apart = sum(_count(details.get(k)) or 0 for k in ("cached_tokens", "cache_write_tokens"))
    return prompt, prompt + apart


def _texts(message: Mapping[str, Any]) -> Iterable[str]:
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        yield from (str(p.get("text", "")) for p in content if isinstance(p, dict))
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            yield function["arguments"]


def sent_characters(messages: Iterable[Mapping[str, Any]], collapse: bool = True) -> int:
    """The characters of what a request's messages say, each run of one repeated character counted once (`collapse`;
    else every character: an upper bound, read without a regular expression's pass)."""
    texts = (text for m in messages if isinstance(m, Mapping) for text in _texts(m))
    return sum(len(_RUNS.sub(r"\1", text)) if collapse else len(text) for text in texts)


def dense_warning(messages: Iterable[Mapping[str, Any]], raw_usage: Mapping[str, Any] | None) -> str | None:
    """A warning when a reply counts implausibly few prompt tokens for what its request sent (a heuristic: never a
    status), else None. None too when the reply reports no prompt count."""
    counts = prompt_counts(raw_usage)
    if counts is None:
        return None
    messages = list(messages)
    if sent_characters(messages, collapse=False) <= max(counts[1] * DENSE_CHARS_PER_TOKEN, DENSE_MIN_CHARS - 1):
        return None  # (plausible even counting every character: most replies stop here)
    sent = sent_characters(messages)
    if sent < DENSE_MIN_CHARS or counts[1] * DENSE_CHARS_PER_TOKEN >= sent:
        return None
    return (f"the server counted {counts[1]} prompt tokens for {sent} characters sent (more than "
            f"{DENSE_CHARS_PER_TOKEN} characters a token, {DENSE_MARK}): it may have cut the prompt to fit its "
            f"context, and the model answered a part of it ({FIX})")


def is_dense_warning(warning: str) -> bool:
    """Is `warning` (one of a judgement's) one `dense_warning` made?"""
    return DENSE_MARK in warning


@dataclass
class _Call:
    number: int
    prompt: int
    sent: int  # how many messages its request held
    served_by: tuple[Any, ...]  # the provider and model its reply named


@dataclass
class PromptGrowth:
    """The prompt counts of one conversation's calls, each request resending every earlier message: with one model
    (one tokenizer) a call's count exceeds every earlier call's. One that does not, by more tokens than a server
    counting only what it did not hold in cache could report, was counted from a prompt the server cut. Only calls
    answered by the same provider and model are compared: a router (OpenRouter's `openrouter/auto`, a fallback, another
    host's chat template) may count the same conversation with another tokenizer or template."""

    calls: list[_Call] = field(default_factory=list)

    def observe(self, number: int, messages: list[Mapping[str, Any]], raw_usage: Mapping[str, Any] | None,
                served_by: tuple[Any, ...] = ()) -> str | None:
        """Call `number` sent `messages`, its reply's own usage is `raw_usage` and it was answered by `served_by`
        (provider, model as the reply named them): the cut it shows, or None."""
        counts = prompt_counts(raw_usage)
        if counts is None:  # (unknown: nothing to compare, never an alarm)
            return None
        prompt, most = counts
        found = None
        for earlier in reversed(self.calls):  # (the latest first: the plainest to read)
            if most > earlier.prompt or earlier.served_by != served_by:
                continue
            appended = messages[earlier.sent:]
            could_be_uncached = (len(json.dumps(appended, ensure_ascii=False, default=str).encode("utf-8"))
                                 + TEMPLATE_TOKENS_PER_MESSAGE * len(appended) + REREAD_TOKENS)
            if prompt > could_be_uncached:
                found = (f"call {number} reported {prompt} prompt tokens, not more than call {earlier.number}'s "
                         f"{earlier.prompt}, though it resent that whole conversation and more: the server cut the "
                         f"prompt to fit the model's context and the model answered a part of it ({FIX})")
                break
        self.calls.append(_Call(number, prompt, len(messages), served_by))
        return found
