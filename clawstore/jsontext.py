"""JSON from outside claw: read safely, and found embedded in free text (a model's reply, an agent's log
output)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def loads(data: str | bytes) -> Any:
    """json.loads for what comes from outside (a provider, a model, a hook, a remote, an archive, an
    object pulled): a document nested deeper than Python's parser goes (`[[[[...` a hundred thousand
    times) is malformed JSON, a ValueError like any other, not a RecursionError that escapes every
    `except ValueError` and ends in a traceback."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply to be read") from None


def json_objects_in(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object embedded in `text`, in the order of their opening brace."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            yield value
        start = text.find("{", start + 1)


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first balanced `{…}` in `text` that parses as a JSON object."""
    return next(json_objects_in(text), None)
