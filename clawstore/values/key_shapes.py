"""The shapes of provider and platform keys (OpenRouter's, Anthropic's, OpenAI's `sk-…`, AWS access key ids, GitHub's
and Slack's tokens), as pattern texts: the judge's redaction (evaluate/redact.py) removes them from what it keeps and
sends, a refusal that quotes a value (errors.quoted) masks them. Texts, not compiled patterns: each user compiles what
it needs, when it is first imported."""

from __future__ import annotations

KEY_SHAPES: tuple[str, ...] = (
    r"sk-or-v1-[A-Za-z0-9]{16,}",
    r"sk-ant-[A-Za-z0-9_-]{16,}",
    r"sk-proj-[A-Za-z0-9_-]{16,}",
    r"\bsk-[A-Za-z0-9_-]{16,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bxox[abprse]-[A-Za-z0-9-]{10,}",
)
# A literal every shape contains: a text without one holds no key of these shapes.
KEY_HINT = r"sk-|AKIA|ASIA|gh[pousr]_|github_pat_|xox[abprse]-"
