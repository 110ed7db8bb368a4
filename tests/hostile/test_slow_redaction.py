"""Redaction runs over every answer, tool output and agent log before it is stored or shown: it must be
linear in the text, whatever the model wrote.

The assignment pattern (`api_key = ...`) began with a lazy name prefix `[\\w.-]*?` tried from every word
boundary: in a text of dotted words (`a.a.a.a...`, a version list, a minified script) each attempt ran to
the end of the text. 10 KB took 9.5 s and 40 KB 100 s, as soon as the text held the word "token" anywhere.
"""

from __future__ import annotations

import time

from clawstore.evaluate.redact import redact_text


def test_redaction_of_a_long_dotted_text_is_linear() -> None:
    text = "a." * 200_000 + " the token"  # 400 KB: hours before
    started = time.monotonic()
    assert redact_text(text, []) == text
    assert time.monotonic() - started < 5


def test_assignments_are_redacted_as_before_whatever_precedes_the_name() -> None:
    cases = {
        "OPENROUTER_API_KEY=sk9abcdefgh": "OPENROUTER_API_KEY=[REDACTED]",
        "cfg.client_secret: 'hunter2hunter2'": "cfg.client_secret: '[REDACTED]'",
        '{"refresh-token": "abc123def456"}': '{"refresh-token": "[REDACTED]"}',
        "x.secret_token=abcdefg and my-password = pa55word!": "x.secret_token=[REDACTED] and my-password = [REDACTED]",
        "a.b.c.token.password=zzz9zzz": "a.b.c.token.password=[REDACTED]",
        "token: 123456, tokens: abcdefgh": "token: 123456, tokens: abcdefgh",  # a counter; another word
    }
    for text, redacted in cases.items():
        assert redact_text(text, []) == redacted, text
