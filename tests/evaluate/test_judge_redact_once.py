"""A judge iteration's attempts, warnings and scores are looked at once for secrets (evaluate/judge.py
`_redact_iteration`): what it stores is what redacting each of them alone stores, for replies with and without
secrets in any of them, and a secret only the scores hold (the reply wrote it with a JSON escape) is still redacted."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from clawstore.evaluate import run_judge_iteration
from clawstore.evaluate.judge import JudgeIteration
from clawstore.evaluate.judge_contract import JudgeScores
from clawstore.evaluate.redact import REDACTED, redact_text, redact_value

from .helpers import judge_reply

FRAGMENTS = ["sk-or-v1-abcdefghijklmnop1234", "AKIAABCDEFGHIJKLMNOP", "Bearer abcdefgh12345678", "api_key=abc123def",
             "token", "plain words", "input_tokens", "\u017fecret=abcdef123456", "", " "]
texts = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=10),
                  st.tuples(st.sampled_from(FRAGMENTS), st.text(max_size=5)).map("".join))


class Scripted:
    def __init__(self, contents: list[str]):
        self.contents = list(contents)

    def __call__(self, body: dict) -> Any:
        content = self.contents.pop(0)
        return type("Result", (), {"message": {"role": "assistant", "content": content},
                                   "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.001}})()


def _each_alone(iteration: JudgeIteration) -> dict[str, Any]:
    """What the iteration stored when its parts were redacted one by one (before the one look)."""
    stored = iteration.to_dict()
    stored["attempts"] = redact_value(iteration.attempts)
    stored["warnings"] = [redact_text(w) for w in iteration.warnings]
    if iteration.scores is not None:
        stored["scores"] = JudgeScores.from_dict(redact_value(iteration.scores.to_dict())).to_dict()
    return stored


@settings(max_examples=300, deadline=None)
@given(summary=texts, evidence=st.lists(texts, max_size=3), invalid=st.one_of(st.none(), texts))
def test_one_look_stores_what_redacting_each_part_stores(summary: str, evidence: list[str],
                                                         invalid: str | None) -> None:
    reply = judge_reply(7)
    reply["summary"] = summary or "s"
    reply["dimensions"]["spark"]["evidence"] = evidence  # (an empty list makes a warning)
    replies = ([invalid] if invalid is not None else []) + [json.dumps(reply)]
    plain = run_judge_iteration(Scripted(replies), {}, attempts=2, redact_secrets=False)
    redacted = run_judge_iteration(Scripted(replies), {}, attempts=2)
    assert redacted.to_dict() == _each_alone(plain)


def test_a_secret_only_the_scores_hold_is_redacted() -> None:
    secret = "sk-or-v1-" + "f" * 40
    reply = json.dumps(judge_reply(7)).replace('"summary": "', '"summary": "s\\u006b-or-v1-' + "f" * 40 + " ", 1)
    assert "sk-" not in reply and "sk-" not in json.dumps(reply)  # (the attempts' text does not show it)
    it = run_judge_iteration(Scripted([reply]), {}, attempts=1)
    assert it.status == "success" and it.scores is not None
    assert secret not in it.scores.summary and REDACTED in it.scores.summary


def test_without_secrets_the_parts_are_kept_as_they_are() -> None:
    it = run_judge_iteration(Scripted(["no json", json.dumps(judge_reply(7))]), {}, attempts=2)
    assert it.status == "success" and it.scores is not None
    assert it.attempts[0]["response"] == "no json" and it.scores.summary == judge_reply(7)["summary"]
