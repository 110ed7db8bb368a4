"""Secret redaction for everything the evaluation layer writes or sends to a judge.

Three layers: known token shapes (OpenAI/OpenRouter/Anthropic keys, bearer tokens, AWS access key
ids, GitHub and Slack tokens, `api_key=…`-style assignments), the values of secret-named keys (in a
mapping, or a `"password": "…"` pair in a JSON text), and the literal values of this process's
secret-looking environment variables (catches key formats no pattern knows).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from clawstore.evaluate.specs import JSON_ATOMS
from clawstore.values.key_shapes import KEY_HINT, KEY_SHAPES

REDACTED = "[REDACTED]"

_TOKEN_PATTERNS: tuple[re.Pattern[str], ...] = tuple(map(re.compile, KEY_SHAPES))
# A literal every token pattern contains: texts without one are not scanned eight times.
_TOKEN_HINT = re.compile(KEY_HINT)
# `Authorization: Bearer <token>` keeps the scheme word so the text still reads naturally.
_BEARER = re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}")
# `api_key = "…"`, `"client_secret": "…"`, `OPENROUTER_API_KEY=…`: keep the name, drop the value.
# The value must contain a letter so counters such as `token: 123456` survive. The match starts at the
# name's last word (the rest of the name stays as it is, as the name does): a lazy name prefix tried
# from every word boundary made a long dotted text (`a.a.a...`) quadratic.
_ASSIGNMENT = re.compile(
    r"(?i)((?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|client[_-]?secret|secret"
    r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|token|password|passwd)[\"']?\s*[:=]\s*[\"']?)"
    r"(?=[^\s\"'`,;{}]*[A-Za-z])([^\s\"'`,;{}]{6,})"
)
# No pattern above and no environment value (at least 8 characters) matches a shorter text.
_SHORTEST_SECRET = 8
# Every name the assignment pattern knows contains one of these. Looked for in the casefolded text with `in`: a
# case-insensitive regex scan cost 90 us on a 3 kB judge prompt. Every character (?i) matches to one of these letters
# casefolds to exactly that letter (K and the long s included), so `in` finds all the regex would.
_ASSIGNMENT_HINTS = ("key", "token", "secret", "passw")
_BEARER_HINT = "bearer"
# Every name _SECRET_KEY_NAME knows contains one of these ("author" stands for "authorization" because (?i) also
# matches a dotless i to "i").
_KEY_HINTS = (*_ASSIGNMENT_HINTS, "author")
SECRET_ENV_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
# Mapping keys whose values (a string or a number) are secrets whatever they look like.
_SECRET_KEY_NAME = re.compile(
    r"(?i)(api[_-]?key|apikey|secret|password|passwd|access[_-]?token|auth[_-]?token|^token$|^authorization$)"
)
# A `"name": value` pair in a JSON text (tool arguments, a tool's output, a file): its value goes when the name is
# one _SECRET_KEY_NAME knows, whatever the value looks like (`"password": "123456"` has no letter _ASSIGNMENT wants).
# A string ends at its first unescaped quote, and a name starts at a quote no backslash precedes (as in JSON): each
# character is read by at most two tries, linear in the text. A value also ends at a line's end, which no JSON string
# holds: a text cut short (`… [truncated N chars]`) keeps no head of it. (Strings as `[^"\\\n]*(?:\\.[^"\\\n]*)*`:
# a third of the time of an alternation tried per character.)
_JSON_PAIR = re.compile(r'(?<!\\)"([^"\\\n]*(?:\\.[^"\\\n]*)*)"(\s*:\s*)("[^"\\\n]*(?:\\.[^"\\\n]*)*"?|-?\d[\d.eE+-]*)')


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking environment variables (long enough to be unambiguous)."""
    if environ is None:  # the process's: worked out again only when it changed
        return list(_process_secrets())
    values = {v for k, v in environ.items() if SECRET_ENV_NAME.search(k) and len(v) >= 8 and v.strip() == v}
    return sorted(values, key=len, reverse=True)


_last_seen: tuple[object, list[str]] = ((), [])  # (the environment as last read, its secrets)


def _process_secrets() -> list[str]:
    """environment_secrets of os.environ, decoded again only when the environment's raw items changed: every redaction
    asks (10,000 times in a 500x4 build) and decoding each time cost about 1 s of the build's 19 s of CPU. Details:
    docs/evaluation.md (Details by module)."""
    global _last_seen
    raw = getattr(os.environ, "_data", None)  # CPython's bytes mapping behind os.environ
    snapshot = tuple(raw.items()) if isinstance(raw, dict) else tuple(os.environ.items())
    seen, secrets = _last_seen
    if snapshot != seen:
        secrets = environment_secrets(dict(os.environ))
        _last_seen = (snapshot, secrets)
    return secrets


def redact_text(text: str, extra_secrets: Iterable[str] | None = None) -> str:
    """`text` with every recognised secret replaced by `[REDACTED]`."""
    if len(text) < _SHORTEST_SECRET:  # most strings of a trace (roles, keys, ids): nothing can match
        return text
    secrets = environment_secrets() if extra_secrets is None else list(extra_secrets)
    for value in secrets:
        if value and value in text:
            text = text.replace(value, REDACTED)
    if _TOKEN_HINT.search(text):  # one pass instead of eight over a text that holds no token
        for pattern in _TOKEN_PATTERNS:
            text = pattern.sub(REDACTED, text)
    folded = text.casefold()
    if _BEARER_HINT in folded:
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
        folded = text.casefold()
    if '"' in text and any(hint in folded for hint in _KEY_HINTS):
        text = _JSON_PAIR.sub(_redact_pair, text)
    if any(hint in folded for hint in _ASSIGNMENT_HINTS):  # (most texts name no secret: cheap scans)
        text = _ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _redact_pair(match: re.Match[str]) -> str:
    """A JSON pair with its value replaced when its name is a secret's (the name as JSON decodes it)."""
    name, value = match.group(1), match.group(3)
    if "\\" in name:
        try:
            name = json.loads(f'"{name}"')
        except ValueError:
            return match.group(0)
    if value == '""' or not _SECRET_KEY_NAME.search(name):
        return match.group(0)
    return f'"{match.group(1)}"{match.group(2)}"{REDACTED}"'


# Every name _SECRET_KEY_NAME or _ASSIGNMENT knows, and the bearer scheme, contain one of these (casefolded: see
# _ASSIGNMENT_HINTS and _KEY_HINTS).
_VALUE_HINTS = (*_KEY_HINTS, _BEARER_HINT)
# Whole strings (quoted) every usage block holds, that nothing would redact (no [:=], no secret key's name), left out
# of the look for names: else "token" would send every trace to the walk. A quote inside a string is escaped, so
# one never matches the end of a longer string's text.
_TOKEN_COUNTS = re.compile(r'"(?:cache_read|cache_write|cached|cached_input|completion|input|max|max_completion|'
                           r'output|prompt|reasoning|total)_tokens(?:_details)?"')
# json.dumps(value, ensure_ascii=False), its encoder made once (json.dumps makes one of those options per call; an
# encoder's encode keeps no state between calls, so threads share it).
_QUICK_ENCODER = json.JSONEncoder(ensure_ascii=False)
_JSON_ESCAPES = re.compile(r'["\\\x00-\x1f]')  # what json.dumps(ensure_ascii=False) writes otherwise than it is


def redact_value(value: Any, extra_secrets: Iterable[str] | None = None) -> Any:
    """Redact every string inside a JSON-like value (keys included)."""
    secrets = environment_secrets() if extra_secrets is None else list(extra_secrets)
    if _nothing_to_redact(value, secrets):
        return _copy(value)
    return _redact(value, secrets)


def holds_no_secret(value: Any) -> bool:
    """True when redact_value would find nothing to replace in `value` (a dict, list or tuple): a caller holding
    several values asks once for all of them, and keeps them as they are."""
    return _nothing_to_redact(value, environment_secrets())


def _nothing_to_redact(value: Any, secrets: list[str]) -> bool:
    """True when no string of `value` can hold a secret, judged on its JSON text at once: a judge's evidence walked
    string by string cost ~10x its encoding, and almost none holds a secret. Every pattern starts with (or needs) a
    literal looked for here, and JSON text holds each string as it is but for the characters it escapes (a secret
    holding one of those, or a value JSON cannot encode, takes the walk)."""
    if not isinstance(value, (Mapping, list, tuple)):
        return False
    try:
        text = _QUICK_ENCODER.encode(value)
    except (TypeError, ValueError):
        return False
    return json_holds_no_secret(text, secrets)


def json_holds_no_secret(text: str, secrets: list[str]) -> bool:
    """True when redact_value would find nothing to replace in the value `text` is the JSON of (json.dumps with
    ensure_ascii=False; sort_keys changes nothing here, default=str only adds text to look at): a caller that encodes
    a value anyway asks this instead of holds_no_secret, which would encode it again. `secrets`: environment_secrets(),
    read once by a caller that asks many times."""
    if any(secret and (secret in text or _JSON_ESCAPES.search(secret)) for secret in secrets):
        return False
    if _TOKEN_HINT.search(text):
        return False
    folded = _TOKEN_COUNTS.sub("", text.casefold())
    return not any(hint in folded for hint in _VALUE_HINTS)


def _copy(value: Any) -> Any:
    """What the walk below returns for a value it changes nothing in: new dicts and lists, keys made strings."""
    kind = type(value)
    if kind is dict:  # (JSON's own types first: an ABC's isinstance costs more than the copy)
        return {k if type(k) is str else str(k): _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind in JSON_ATOMS or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


def _redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            if _is_secret_value(v) and _SECRET_KEY_NAME.search(key):
                out[redact_text(key, secrets)] = REDACTED
            else:
                out[redact_text(key, secrets)] = _redact(v, secrets)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(v, secrets) for v in value]
    return value


def _is_secret_value(value: Any) -> bool:
    """Whether a secret-named key's value is replaced: a non-empty string or a number (a PIN, a numeric password),
    however short. (Not a bool or an empty string, which hide nothing, nor a container, which the walk goes into.)"""
    return (isinstance(value, str) and value != "") or (type(value) in (int, float))
