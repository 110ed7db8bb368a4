"""Canonical JSON: the one byte encoding that keys, records and input documents are hashed in."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import struct
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

import msgspec

# The C encoder json.dumps makes on every call, made once (a record or a document per node, several per request),
# and without its circular-reference bookkeeping: claw encodes parsed JSON and its own documents, never a cycle
# (one would raise RecursionError instead of ValueError). The same bytes as json.dumps with these settings.
_ENCODE = (c_make_encoder(None, json.JSONEncoder().default, encode_basestring, None, ":", ",", True, False, False)
           if c_make_encoder is not None else None)


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# msgspec writes the same bytes ~3x as fast (sorted keys, the same escapes, UTF-8) but for floats: its digits are
# the same shortest round-trip digits as repr's, but it writes 1e-05 as 0.00001 and 1e+16 as 1e16, and NaN or
# infinity as null where json refuses them. So its text is taken only when the value's floats are known: the
# msgpack form of the same value (a C pass) holds each float as 0xcb and its 8 bytes, and every 0xcb is looked at
# (one inside a string or a number only sends a value to a slower path). In [1e-4, 1e16) and 0 the two writings
# are equal (tests/test_canonical.py); outside, the float's text is respelt as repr's; NaN or infinity, or
# anything msgspec refuses (non-str keys, integers beyond 64 bits, types json refuses), goes to json itself.
_FAST = msgspec.json.Encoder(order="sorted", enc_hook=_refuse)
_PACK = msgspec.msgpack.Encoder(enc_hook=_refuse)
_DOUBLE = struct.Struct(">d").unpack_from
_INF = float("inf")
# A float in msgpack: 0xcb, then sign, 11 bits of exponent and the mantissa, big-endian. Matched: every exponent
# below 2^-13 (1.2e-4; and zero, looked at again) or from 2^53 (9.0e15): a superset of the floats written unlike repr.
_ODD_FLOAT = re.compile(rb"\xcb(?:[\x00-\x3e\x44-\xbe\xc4-\xff]|[\x3f\xbf][\x00-\x1f]|[\x43\xc3][\x40-\xff])")
_BEFORE, _AFTER = b":,[", b",]}"
_RESPELT_MAX = 8


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, floats as Python repr (never rounded)."""
    try:
        text = _FAST.encode(value)
        packed = _PACK.encode(value)
    except Exception:  # noqa: BLE001 - whatever msgspec refuses, json judges (and raises its own error)
        return strict_json(value)
    if _ODD_FLOAT.search(packed) is None:
        return text
    odd = set()
    at = packed.find(b"\xcb")
    while at >= 0:
        if at + 9 <= len(packed):
            x = _DOUBLE(packed, at + 1)[0]
            if not 1e-4 <= abs(x) < 1e16 and x != 0.0:
                if x != x or abs(x) == _INF:  # (NaN or infinity: json refuses them)
                    return strict_json(value)
                odd.add(x)
        at = packed.find(b"\xcb", at + 1)
    if len(odd) > _RESPELT_MAX:  # (each a pass over the text: past a few, json's one pass is cheaper)
        return strict_json(value)
    for x in odd:
        text = _respelt(text, _FAST.encode(x), repr(x).encode())
    return text


def _respelt(text: bytes, token: bytes, right: bytes) -> bytes:
    """`text` with the number `token` written `right` wherever it stands as a number: between JSON punctuation and
    outside any string. Whether a place is inside a string is the parity of the quotes before it that are not
    escaped: msgspec's text holds a backslash only in a string's escape, so after its escaped backslashes are
    dropped a backslash before a quote escapes it. (Each place follows `:,[`, never inside a run of backslashes.)"""
    if token == right:
        return text
    parts: list[bytes] = []
    last = seen = quotes = 0
    at = text.find(token)
    while at >= 0:
        end = at + len(token)
        if (at == 0 or text[at - 1] in _BEFORE) and (end == len(text) or text[end] in _AFTER):
            span = text[seen:at].replace(b"\\\\", b"")
            quotes += span.count(b'"') - span.count(b'\\"')
            seen = at
            if quotes % 2 == 0:
                parts += (text[last:at], right)
                last = end
        at = text.find(token, end)
    return b"".join((*parts, text[last:])) if parts else text


def strict_json(value: Any) -> bytes:
    """The same bytes, by json's own encoder: the definition of them, and of what is refused. canonical_json writes
    what msgspec knows and json does not (a set, bytes, a dataclass, a date, an enum, a UUID, a Decimal); a value
    from outside that must be plain JSON is checked with this."""
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
