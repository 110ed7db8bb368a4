"""Canonical JSON: the one byte encoding that keys, records and input documents are hashed in."""

from __future__ import annotations

import dataclasses
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, floats as Python repr (never rounded)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def field_values(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict whose values are shared, not copied (asdict deep-copies every
    nested list and dict): for documents turned into JSON at once, on paths run once per node."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
