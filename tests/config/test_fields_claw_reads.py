"""Fields a judge or a suite model carries that clawstore reads itself (open objects: every other extra key passes
through) are checked by `claw validate` like any typed field: one line naming the file and the field, exit 2.

Before session 72 they were not: a judge's `retries: two` or `timeout_seconds: soon` validated, a build then ran
(and paid for) every run and failed every judgement with a ValueError; `timeout_seconds: 0` silently became 120 s
and `retries: -1` was taken. A model name that is not text (`openrouter_model: 5`, a judge's `judge_model: 5`) was
passed over without a word, so another model (the `model_id`, the `judge_id`) was called and paid for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import eval_profile
from tests.support.workspace import Workspace

EVAL = "configs/evaluation_profiles/ev.yaml"
SUITE = "configs/suites/main.yaml"


def _judge(ws: Workspace, **fields: Any) -> None:
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: doc["judges"][0].update(fields))


def _one_error(claw: Claw, path: str, field: str, says: str) -> None:
    code, out, err = claw("validate")
    lines = [line for line in (out + err).splitlines() if line.startswith("configs/")]
    assert code == 2, out + err
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: {field}: "), lines
    assert says in lines[0], lines
    assert "Traceback" not in out + err


@pytest.mark.parametrize(("field", "value", "says"), [
    ("retries", "two", "expected an integer from 0 to 100"),
    ("retries", -1, "expected an integer from 0 to 100"),
    ("retries", True, "expected an integer from 0 to 100"),
    ("retries", 101, "expected an integer from 0 to 100"),
    ("retries", 2.5, "expected an integer from 0 to 100"),
    ("timeout_seconds", "soon", "expected a number > 0"),
    ("timeout_seconds", 0, "expected a number > 0"),
    ("timeout_seconds", -5, "expected a number > 0"),
    ("timeout_seconds", 10**7, "expected a number > 0 and at most 604,800"),
    # (how often an invalid answer is asked: before session 75 `two` failed the build after its runs were paid, and
    # 0 became 3 without a word)
    ("attempts", "two", "expected an integer from 1 to 100"),
    ("attempts", 0, "expected an integer from 1 to 100"),
    ("attempts", 101, "expected an integer from 1 to 100"),
    ("attempts", True, "expected an integer from 1 to 100"),
])
def test_a_judges_transport_fields_are_checked(ws: Workspace, claw: Claw, field: str, value: Any,
                                               says: str) -> None:
    _judge(ws, **{field: value})
    _one_error(claw, EVAL, f"judges[0].{field}", says)


@pytest.mark.parametrize("fields", [{"retries": 0, "timeout_seconds": 0.5}, {"retries": 100, "timeout_seconds": 60},
                                    {"retries": None, "timeout_seconds": None, "attempts": None},
                                    {"attempts": 1}, {"attempts": 100}])
def test_a_judges_transport_fields_in_range_validate(ws: Workspace, claw: Claw, fields: dict[str, Any]) -> None:
    _judge(ws, **fields)
    code, out, err = claw("validate")
    assert code == 0, out + err


def test_a_build_with_a_bad_judge_field_asks_nothing(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """The build is refused before its first request: nothing is paid for a judgement that cannot be made."""
    _judge(ws, retries="two")
    code, out, err = claw.build("--evaluation-profile", "ev")
    assert code == 2, out + err
    assert f"{EVAL}: judges[0].retries: " in out + err
    assert "Traceback" not in out + err
    assert standin.requests == []


def test_a_judges_attempts_are_claws_not_sent(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """`attempts` (how often claw asks again after an answer it cannot read) is claw's own, as `retries` is: before
    session 75 every judge request carried it as a request option (`"attempts": 2`), which a provider that refuses
    an unknown argument answers with a 400, every judgement failing after the runs were paid."""
    from tests.support.judging import JUDGE, judge_reply

    _judge(ws, attempts=2)
    standin.script(JUDGE, judge_reply(7))
    code, out, err = claw.build("--evaluation-profile", "ev")
    assert code == 0, out + err
    bodies = [r["body"] for r in standin.requests if r["model"] == JUDGE]
    assert len(bodies) == 4 and not any("attempts" in body for body in bodies), bodies


@pytest.mark.parametrize(("field", "value"), [("judge_model", 5), ("model_id", ["judge/j1"]), ("judge_model", True)])
def test_a_judges_model_name_is_text(ws: Workspace, claw: Claw, field: str, value: Any) -> None:
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: (doc["judges"][0].pop("model"),
                                                        doc["judges"][0].update({field: value})))
    _one_error(claw, EVAL, f"judges[0].{field}", "expected a string")


@pytest.mark.parametrize("value", [5, ["vendor/m1"], {"name": "vendor/m1"}])
def test_a_models_openrouter_model_is_text(ws: Workspace, claw: Claw, value: Any) -> None:
    ws.edit("suites/main.yaml", lambda doc: doc["models"][0].update({"openrouter_model": value}))
    _one_error(claw, SUITE, "models[0].openrouter_model", "expected a string")


def test_model_names_as_text_or_null_validate(ws: Workspace, claw: Claw, tmp_path: Path) -> None:
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: doc["judges"][0].update({"judge_model": None,
                                                                              "model_id": "judge/j1"}))
    ws.edit("suites/main.yaml", lambda doc: (doc["models"][0].update({"openrouter_model": None}),
                                             doc["models"][1].update({"openrouter_model": "vendor/other"})))
    code, out, err = claw("validate")
    assert code == 0, out + err


@pytest.mark.parametrize(("where", "key", "value", "says"), [
    ("request_options", "temperature", "hot", "expected a number from 0 to 2"),
    ("", "temperature", "hot", "expected a number from 0 to 2"),
    ("request_options", "temperature", 2.5, "expected a number from 0 to 2"),
    ("request_options", "top_p", 1.5, "expected a number from 0 to 1"),
    ("", "top_p", "x", "expected a number from 0 to 1"),
    ("", "max_tokens", 0, "expected an integer from 1"),
    ("request_options", "seed", 1.5, "expected an integer or null"),
])
def test_a_judges_request_settings_are_checked(ws: Workspace, claw: Claw, where: str, key: str, value: Any,
                                               says: str) -> None:
    """The request settings the runner settings share (temperature, top_p, max_tokens, seed) follow their rules in a
    judge's request too: a `temperature` that is no number was replaced by 0.0 without a word, and a wrong `top_p`,
    `max_tokens` or `seed` was sent as written (llama.cpp's server answers a string there with a 500), so every
    judgement failed, after the runs it judges were paid for."""
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: (doc["judges"][0].setdefault(where, {}) if where else
                                                        doc["judges"][0]).update({key: value}))
    _one_error(claw, EVAL, f"judges[0].{where + '.' if where else ''}{key}", says)


def test_a_judges_request_settings_in_range_validate(ws: Workspace, claw: Claw) -> None:
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: doc["judges"][0].update(
        {"max_tokens": 2048, "request_options": {"temperature": 0.0, "top_p": 1, "seed": None,
                                                 "reasoning": {"effort": "none"}}}))
    code, out, err = claw("validate")
    assert code == 0, out + err


@pytest.mark.parametrize("where", ["request_options", ""])
def test_a_judge_that_would_stream_is_refused(ws: Workspace, claw: Claw, standin: StandIn, where: str) -> None:
    """claw reads a judge's reply whole: with `stream: true` the provider streamed every judgement (made, and paid
    for) and claw could read none ("malformed reply"), retrying each; a build now asks nothing."""
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: (doc["judges"][0].setdefault(where, {}) if where else
                                                        doc["judges"][0]).update({"stream": True}))
    _one_error(claw, EVAL, f"judges[0].{where + '.' if where else ''}stream", "claw reads the judge's reply whole")
    code, out, err = claw.build("--evaluation-profile", "ev")
    assert code == 2, out + err
    assert standin.requests == []


def test_a_judge_that_does_not_stream_validates(ws: Workspace, claw: Claw) -> None:
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: doc["judges"][0].update({"request_options": {"stream": False}}))
    code, out, err = claw("validate")
    assert code == 0, out + err
