"""A provider reply's numbers and content are input: check them before anything uses them.

A reply whose answer is a number is malformed: the call fails as `invalid_response` naming the field, so the run
ends `provider_error` (not cached, retried by the next build); so does `content: null` that nothing explains (no tool
call, reasoning or refusal beside it, no finish_reason `length` or `content_filter`). A reply whose usage says
`completion_tokens: 1e30`, `cost: "NaN"` or `cost: -1e9` keeps its answer (failing it, every build would send it and
pay for it again), but none of its usage numbers is believed: its tokens and cost are unknown (`Usage.not_believed`,
the reason kept as `usage_rejected`) instead of numbers that poison sums and the query manifest.
"""

from __future__ import annotations

from typing import Any

from clawstore.values.bounds import MAX_REPLY_COST_USD, MAX_REPLY_TOKENS, amount_problem, count_problem

# Usage fields holding token counts, as OpenAI / OpenRouter name them (details nested one level).
TOKEN_PATHS = (
    ("prompt_tokens",), ("completion_tokens",), ("total_tokens",), ("input_tokens",), ("output_tokens",),
    ("reasoning_tokens",), ("prompt_tokens_details", "cached_tokens"),
    ("prompt_tokens_details", "cache_write_tokens"), ("completion_tokens_details", "reasoning_tokens"),
)


def usage_problem(usage: Any) -> str | None:
    """Why a reply's `usage` object is malformed ('usage.<field>: ...'), or None."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        return "usage: expected a mapping"
    for path in TOKEN_PATHS:
        holder: Any = usage
        for part in path[:-1]:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or holder.get(path[-1]) is None:
            continue
        problem = count_problem(holder[path[-1]], MAX_REPLY_TOKENS)
        if problem:
            return f"usage.{'.'.join(path)}: {problem}"
    problem = amount_problem(usage.get("cost"), MAX_REPLY_COST_USD)
    if problem:
        return f"usage.cost: {problem}"
    details = usage.get("cost_details")
    if usage.get("is_byok") is True and isinstance(details, dict):  # (its cost: providers/usage.py _byok_cost)
        problem = amount_problem(details.get("upstream_inference_cost"), MAX_REPLY_COST_USD)
        return f"usage.cost_details.upstream_inference_cost: {problem}" if problem else None
    return None


# What a message with `content: null` and no tool call may hold instead, as servers send it: a reasoning model's
# thoughts when it spent max_tokens on them (vLLM's reasoning parsers: `reasoning_content`, later `reasoning`, as
# OpenRouter), or a refusal (OpenAI's `refusal`); or the choice says why it stopped with no text (NO_TEXT_FINISH: its
# max_tokens spent, a content filter). The model's own (empty) answer, not a malformed reply.
NO_TEXT_BESIDE = ("reasoning", "reasoning_content", "refusal")
NO_TEXT_FINISH = frozenset({"length", "content_filter"})


def message_problem(message: dict[str, Any], finish_reason: Any = None) -> str | None:
    """Why choices[0].message is malformed: content a string, or null alongside tool calls or NO_TEXT_BESIDE, or
    ended by a NO_TEXT_FINISH `finish_reason`."""
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        return "choices[0].message.tool_calls: expected a list"
    content = message.get("content")
    if content is None:
        if calls or finish_reason in NO_TEXT_FINISH or any(
                isinstance(message.get(k), str) and message[k].strip() for k in NO_TEXT_BESIDE):
            return None
        return ("choices[0].message.content: expected a string (null only with tool calls, reasoning or a refusal, "
                "or cut by length or a content filter), got null")
    if not isinstance(content, str):
        return f"choices[0].message.content: expected a string, got {type(content).__name__}"
    return None
