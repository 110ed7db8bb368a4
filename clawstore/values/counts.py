"""A count a record keeps only when it is one: an int, never a bool (Python reads True as 1)."""

from __future__ import annotations

from typing import Any


def counted(name: str, value: Any) -> dict[str, int]:
    """{name: value} when `value` is a count, else {} (the field left out: NULL in `claw query`, never 0)."""
    return {name: value} if isinstance(value, int) and not isinstance(value, bool) else {}
