"""Token totals with unknown parts: a paid node whose usage was not reported, or not believed (`usage_rejected`),
has unknown tokens (NULL, never 0), and a sum over it is shown the way a cost with unknown parts is (values/costs.py):
`?` when none is known, `≥N` (what is known) when some are not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOKENS_UNKNOWN = "tokens_unknown"  # a build log's count of its paid nodes whose tokens are unknown
# A sum's token counts that are NULL when a part is unknown (reasoning and cached tokens, which many providers leave out
# of a usage that is otherwise known, stay the sum of those reported).
UNKNOWN_WHEN_PART_IS = ("input_tokens", "output_tokens")


def tokens_known(metrics: Mapping[str, Any] | None) -> bool:
    """Are a paid node's tokens known (its input and output counts both numbers)?"""
    metrics = metrics or {}
    return metrics.get("input_tokens") is not None and metrics.get("output_tokens") is not None


def token_cell(known: int, unknown: int, counted: int) -> str:
    """For a table cell: `?` when every counted node's tokens are unknown and none counted a known part (what it spent
    at least), `≥known` when some are, else the number."""
    if unknown and unknown >= counted and not known:
        return "?"
    return ("≥" if unknown else "") + str(known)


def token_notes(unknown: int, counted: int) -> str:
    """" (2 of 8 unknown)", or "" when every node's tokens are known."""
    return f" ({unknown} of {counted} unknown)" if unknown else ""
