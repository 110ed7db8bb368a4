"""Canonical JSON: the one byte encoding that keys, records and input documents are hashed in."""

from __future__ import annotations

import dataclasses
import functools
import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

# The C encoder json.dumps makes on every call, made once (a record or a document per node, several per request),
# and without its circular-reference bookkeeping: claw encodes parsed JSON and its own documents, never a cycle
# (one would raise RecursionError instead of ValueError). The same bytes as json.dumps with these settings.
_ENCODE = (c_make_encoder(None, json.JSONEncoder().default, encode_basestring, None, ":", ",", True, False, False)
           if c_make_encoder is not None else None)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, floats as Python repr (never rounded)."""
    if _ENCODE is None:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    return "".join(_ENCODE(value, 0)).encode("utf-8")


def field_values(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict whose values are shared, not copied (asdict deep-copies every
    nested list and dict): for documents turned into JSON at once, on paths run once per node."""
    return {name: getattr(obj, name) for name in _field_names(type(obj))}


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))
