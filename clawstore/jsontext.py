"""Find JSON objects embedded in free text (a model's reply, an agent's log output)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def json_objects_in(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object embedded in `text`, in the order of their opening brace."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            yield value
        start = text.find("{", start + 1)


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first balanced `{…}` in `text` that parses as a JSON object."""
    return next(json_objects_in(text), None)
