"""The documented bounds on numbers that come from outside (provider replies) and go into records.

One home for the rule, used where a reply is read (providers), where a record is written (graph)
and where records are indexed (query; a record's metrics: store/documents.py metrics_problem), so a
number that passed one gate passes the others and a DuckDB column never meets a value it cannot hold
(docs/runners.md, "Provider replies are input").
"""

from __future__ import annotations

import math
from typing import Any

from clawstore.values.costs import SOURCES

MAX_REPLY_TOKENS = 100_000_000  # tokens one reply may report in any usage field
MAX_REPLY_COST_USD = 10_000.0  # cost one reply may report
MAX_RECORD_TOKENS = 10**12  # tokens a record's metrics may sum to (many calls of one node)
MAX_RECORD_COST_USD = 10_000_000.0
MAX_TOOL_CALLS = 10_000_000  # tool calls an OpenClaw run's turns may report in all (more: no count)
MAX_LATENCY_S = 10_000_000.0


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "an integer too large to show"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def count_problem(value: Any, high: int) -> str | None:
    """Why `value` is not a token count in [0, high] (an integer; an integral float is tolerated)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= high:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        return f"expected an integer from 0 to {high:,}, got {_shown(value)}"
    return None


def amount_problem(value: Any, high: float) -> str | None:
    """Why `value` is not a finite number in [0, high] or absent (None)."""
    if value is None:
        return None
    # (the bounds first: an int past a float's range compares exactly, and isfinite of it raises OverflowError)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high \
            or not math.isfinite(value):
        return f"expected a finite number from 0 to {high:,.0f} or null, got {_shown(value)}"
    return None


def source_problem(value: Any) -> str | None:
    """Why `value` is not a cost source (values/costs.py SOURCES) or absent (None)."""
    return None if value is None or value in SOURCES else f"expected one of {', '.join(SOURCES)}, got {_shown(value)}"
