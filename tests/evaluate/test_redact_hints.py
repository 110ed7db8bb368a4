"""Redaction's quick pre-checks (names looked for in the casefolded text) never skip a secret the
case-insensitive patterns would have caught, whatever case or look-alike letters the name is written in."""

from __future__ import annotations

import pytest

from clawstore.evaluate.redact import REDACTED, redact_text


@pytest.mark.parametrize("text", [
    "Authorization: BEARER abcdefgh12345678",
    "bEaReR\tabcdefgh12345678",
    "API_KEY=abcdef123456",
    "Token: 'abcdef123456'",
    "\u017fecret=abcdef123456",  # the long s: (?i) matches it to "s"
    "api_\u212aey=abcdef123456",  # the Kelvin sign: (?i) matches it to "k"
    "PASSWD: hunter2hunter2",
])
def test_a_name_in_any_case_is_still_redacted(text: str) -> None:
    redacted = redact_text(text, [])
    assert REDACTED in redacted
    assert "abcdef123456" not in redacted and "abcdefgh12345678" not in redacted and "hunter2hunter2" not in redacted


def test_a_text_naming_no_secret_is_left_as_it_is() -> None:
    text = "The answer is four: two plus two, counted twice over, token by token."
    assert redact_text(text, []) == text
