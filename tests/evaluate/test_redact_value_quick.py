"""redact_value's quick look at a value's JSON text (most evidence holds no secret) returns exactly what the walk
string by string returns: every secret a pattern, a key name or the environment names is still redacted, whatever
case, look-alike letter or JSON escape it is written with, and the value returned is a copy either way."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawstore.evaluate.redact import REDACTED, _redact, redact_value

SECRETS = ["env-value-1234", "other-value-9876"]  # (no name a pattern knows, nothing JSON escapes)
ESCAPED = ['quo"te\\val9876']  # written otherwise in JSON text
# Fragments that make the walk redact something, mixed into generated strings and keys.
FRAGMENTS = ["sk-or-v1-abcdefghijklmnop1234", "AKIAABCDEFGHIJKLMNOP", "Bearer abcdefgh12345678", "api_key=abc123def",
             "PASSWD: hunter2hunter2", "\u017fecret=abcdef123456", "api_\u212aey=abcdef123456", "password",
             "authorization", "AUTHOR\u0131ZATION", "token", "env-value-1234", 'quo"te\\val9876',
             '"password": "12"', '{"Token":7}', '"api_key": "', "plain words", "ünïcödé ß", "\n\t", '"', "\\"]

texts = st.one_of(st.text(max_size=12), st.sampled_from(FRAGMENTS),
                  st.tuples(st.sampled_from(FRAGMENTS), st.text(max_size=6)).map("".join))
leaves = st.one_of(texts, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(texts, st.integers()), inner, max_size=4)), max_leaves=20)


@settings(max_examples=600, deadline=None)
@given(values)
def test_the_quick_look_returns_what_the_walk_returns(value: Any) -> None:
    assert redact_value(value, SECRETS) == _redact(value, SECRETS)
    assert redact_value(value, ESCAPED) == _redact(value, ESCAPED)


def test_a_secret_json_escapes_is_redacted() -> None:
    redacted = redact_value({"tool": {"output": 'the env holds quo"te\\val9876 here'}}, ESCAPED)
    assert redacted == {"tool": {"output": f"the env holds {REDACTED} here"}}


@pytest.mark.parametrize("value", [
    {"messages": [{"role": "user", "content": "my key is sk-proj-abcdefghijklmnopqrst"}]},
    {"headers": {"Authorization": "Basic dXNlcjpwYXNz"}},
    {"AUTHOR\u0131ZATION": "Basic dXNlcjpwYXNz"},  # (?i) takes the dotless i for an i
    {"nested": [["api_\u212aey=abcdef123456"]]},
    ["env-value-1234"],
])
def test_a_secret_is_redacted_through_the_quick_look(value: Any) -> None:
    redacted = redact_value(value, SECRETS)
    assert REDACTED in repr(redacted)
    assert redacted == _redact(value, SECRETS)


def test_a_value_with_nothing_to_redact_comes_back_as_a_copy() -> None:
    value = {"messages": [{"role": "assistant", "content": "four"}], "pair": ("a", "b"), 1: None}
    redacted = redact_value(value, SECRETS)
    assert redacted == {"messages": [{"role": "assistant", "content": "four"}], "pair": ["a", "b"], "1": None}
    assert redacted["messages"] is not value["messages"] and redacted["messages"][0] is not value["messages"][0]


def test_a_value_json_cannot_encode_is_walked() -> None:
    marker = object()
    value = {"thing": marker, "text": "sk-or-v1-abcdefghijklmnop1234"}
    assert redact_value(value, SECRETS) == {"thing": marker, "text": REDACTED}
