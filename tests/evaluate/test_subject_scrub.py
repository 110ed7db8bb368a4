"""Blind judging's scrub of the subject's names: compiled once, the same text as one `re.sub` per name and string."""

from __future__ import annotations

import random
import re

from clawstore.evaluate.judge_evidence import SUBJECT_PLACEHOLDER, _name_pattern, _scrub, build_judge_evidence


class _ReSub:
    """A name substituted as the scrub did first: `re.sub(re.escape(name), ..., flags=re.I)` per string."""

    def __init__(self, name: str) -> None:
        self.name = name

    def sub(self, placeholder: str, text: str) -> str:
        return re.sub(re.escape(self.name), placeholder, text, flags=re.I)


# Names that overlap, nest, hold regex characters, or match only by Unicode case folding (the Kelvin sign is a "k").
NAMES = ["vendor/k2-model.1", "k2-model.1", "model.1 [subject", "l.1", "a+b(c)*", "ject mod"]
PIECES = [*NAMES, "K2-MODEL.1", "\u212a2-model.1", "VENDOR/", "subject", "[", "]", " ", "model", ".1", "x", "é", "\\1"]


def test_the_scrub_says_what_one_re_sub_per_name_says() -> None:
    rng = random.Random(54)
    for _ in range(400):
        names = sorted(rng.sample(NAMES, rng.randint(1, len(NAMES))), key=lambda s: (-len(s), s))
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        value = {"a": text, "b": [text.upper(), {"c": text[::-1]}, 3, None]}
        first = _scrub(value, [_ReSub(n) for n in names])
        assert _scrub(value, [_name_pattern(n) for n in names]) == first, (names, text)


def test_the_evidence_hides_the_subject_model() -> None:
    artifact = {"status": "success", "request": {"requested_model": "vendor/k2-model.1"},
                "trace": [{"event_type": "final_output", "content": "I am \u212a2-MODEL.1 by Vendor/K2-model.1."}]}
    evidence = build_judge_evidence(artifact, redact_secrets=False)
    assert evidence["final_output"]["text"] == f"I am {SUBJECT_PLACEHOLDER} by {SUBJECT_PLACEHOLDER}."
