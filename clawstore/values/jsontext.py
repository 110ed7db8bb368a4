"""JSON from outside claw: read safely, and found embedded in free text (a model's reply, an agent's log
output)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import msgspec

# A JSON string, to its closing quote or to the end of an unterminated one, or a bracket. Possessive:
# an unterminated string is consumed once, not tried again from every quote inside it (quadratic: 60 KB
# of escaped quotes took 20 s).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+"?|[\[\]{}]', re.DOTALL)
SEARCH_BUDGET = 16  # json_objects_in parses at most this many characters per character of text (plus 1 MiB)
# A reply's JSON (a model's, a judge's, an agent's, a hook's) nested deeper than this is malformed: far
# deeper than any real one, and far from the depth where Python's encoder gives up on a record that holds
# it (the parser reaches about 990 levels; the encoder, deeper in the stack, fewer).
REPLY_MAX_DEPTH = 200


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


# Python's parser takes NaN and Infinity, which JSON does not have and claw cannot hash or store: a value
# holding one made its record unwritable (a provider's reply, a run already paid for). A reply's decoder
# also refuses a literal too large for a float (1e999 reads as infinity).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_REPLY_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
# msgspec reads what Python's parser reads, to the same values (integers of any size, floats correctly
# rounded, the last of duplicate keys), about three times as fast: a pull checks 40,000 records, a query
# or a plan reads every record of a campaign. What it refuses, Python's parser judges, whose verdict
# stands: a number too large for a float (Python reads infinity), a lone surrogate escape, and anything
# malformed or nested too deeply, refused by both (tests/test_jsontext.py compares them).
_FAST_DECODER = msgspec.json.Decoder()


def loads(data: str | bytes) -> Any:
    """json.loads for what comes from outside (a provider, a model, a hook, a remote, an archive, an
    object pulled): a document nested deeper than Python's parser goes (`[[[[...` a hundred thousand
    times) is malformed JSON, a ValueError like any other, not a RecursionError that escapes every
    `except ValueError` and ends in a traceback; so is NaN or Infinity. UTF-8 only."""
    try:
        return _FAST_DECODER.decode(data)
    except (ValueError, RecursionError):  # (msgspec.DecodeError is a ValueError)
        return _decode(_DECODER, data)


def loads_reply(text: str | bytes) -> Any:
    """`loads` for JSON that claw keeps in a record (a reply, an imported result): also a ValueError when nested deeper
    than REPLY_MAX_DEPTH or holding a number too large for a float; a lone surrogate reads as U+FFFD. Why:
    docs/runners.md (Details by module)."""
    text = _text(text)
    if nests_deeper_than(text, REPLY_MAX_DEPTH):
        raise ValueError(f"JSON nested more than {REPLY_MAX_DEPTH} levels deep")
    value = _decode(_REPLY_DECODER, text)
    # (ASCII text without an escape holds no surrogate: two C scans instead of the pattern's, the usual reply)
    hint = "\\u" in text or not text.isascii()
    return without_lone_surrogates(value) if hint and _SURROGATE_HINT.search(text) else value


# A surrogate escape or code point in a JSON text: only then can a value read from it hold a lone one.
_SURROGATE_HINT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
# In a str read from JSON a pair of surrogate escapes is one character already: what is left is lone.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate (which UTF-8 cannot encode) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def without_lone_surrogates(value: Any) -> Any:
    """A JSON-like value with every string (keys too) passed through replace_lone_surrogates. (Recursive:
    for values of bounded depth, as loads_reply's are.)"""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, list | tuple):
        return [without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {replace_lone_surrogates(key): without_lone_surrogates(item) for key, item in value.items()}
    return value


def _text(data: str | bytes) -> str:
    return data if isinstance(data, str) else str(data, "utf-8")


def _decode(decoder: json.JSONDecoder, data: str | bytes) -> Any:
    try:
        return decoder.decode(_text(data))
    except RecursionError:
        raise ValueError("JSON nested too deeply to be read") from None


def nests_deeper_than(text: str, limit: int, start: int = 0, end: int | None = None) -> bool:
    """Do the brackets of this JSON text (of `text[start:end]`, outside its strings) nest deeper than
    `limit`? One pass, no recursion, no copy, linear whatever the text."""
    end = len(text) if end is None else end
    if text.count("[", start, end) + text.count("{", start, end) <= limit:
        return False
    depth = 0
    for match in _TOKEN.finditer(text, start, end):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def json_objects_in(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object embedded in `text`, in the order of their opening brace.

    The search stops after SEARCH_BUDGET characters parsed per character of text, so that nested never-closed objects
    cannot make it quadratic. Details: docs/runners.md (Details by module)."""
    decoder = _REPLY_DECODER
    budget = SEARCH_BUDGET * len(text) + (1 << 20)
    start = text.find("{")
    while start != -1 and budget > 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            value, end = None, exc.pos + 1
        except (ValueError, RecursionError):
            value, end = None, len(text)
        budget -= end - start
        if isinstance(value, dict) and not nests_deeper_than(text, REPLY_MAX_DEPTH, start, end):
            yield value
        start = text.find("{", start + 1)


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first balanced `{…}` in `text` that parses as a JSON object."""
    return next(json_objects_in(text), None)
