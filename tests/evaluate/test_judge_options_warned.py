"""A judge's request options that make every judgement unreadable after it is paid for. Found against llama.cpp's
server (llama-cpp-python 0.3.36, tests/realserver): `tool_choice` naming a function (the reply is a tool call, no
text), `max_tokens: 20` (the verdict cut, finish_reason length) and `stop: ["}"]` (cut at the first brace) each made
every judgement `invalid` after three paid attempts, exit 1, and `claw validate` said OK. The schema passes request
options through, so claw does not refuse them: each is named in one warning line, by `claw validate` and by a build
before it sends anything. Options that leave the verdict readable (`logprobs`, a big `max_tokens`, a `stop` no
verdict holds, llama.cpp's `response_format` holding the verdict's schema) are not warned of."""

from __future__ import annotations

from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.judging import DIMS, JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

PROFILE = "configs/evaluation_profiles/ev.yaml"
TOOL = {"type": "function", "function": {"name": "verdict", "parameters": {"type": "object"}}}
VERDICT_SCHEMA = {"type": "object", "properties": {"summary": {"type": "string"}, "overall": {"type": "object"},
                                                   "dimensions": {"type": "object"}}}
OTHER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}}

# (request options, the field warned of, what the line says)
WARNED = [
    ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "verdict"}}}, "tool_choice",
     "every reply is a tool call"),
    ({"tools": [TOOL], "tool_choice": "required"}, "tool_choice", "every reply is a tool call"),
    ({"tools": [TOOL]}, "tools", "may answer with a tool call"),
    ({"tools": [TOOL], "tool_choice": {"type": "auto"}}, "tools", "may answer with a tool call"),
    ({"functions": [TOOL["function"]], "function_call": {"name": "verdict"}}, "function_call",
     "every reply is a tool call"),
    ({"max_tokens": 20}, "max_tokens", "cut at 20 tokens"),
    ({"max_completion_tokens": 64}, "max_completion_tokens", "cut at 64 tokens"),
    ({"stop": ["}"]}, "stop", "every verdict holds '}'"),
    ({"stop": "\n"}, "stop", "every verdict holds '\\n'"),
    ({"stop": ["</s>", "```"]}, "stop", "every verdict holds '```'"),
    ({"n": 3}, "n", "the first of the 3 choices"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": OTHER_SCHEMA}}},
     "response_format", "no summary, dimensions, overall"),
    ({"modalities": ["audio"]}, "modalities", "no text"),
]
QUIET = [{"logprobs": True, "top_logprobs": 2}, {"max_tokens": 1024}, {"stop": ["###"]}, {"n": 1},
         {"tools": [TOOL], "tool_choice": "none"}, {"tools": [TOOL], "tool_choice": {"type": "none"}},
         {"response_format": {"type": "json_object"}},
         {"response_format": {"type": "json_object", "schema": VERDICT_SCHEMA}},
         {"response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": VERDICT_SCHEMA}}},
         {"modalities": ["text"]}]


def _judges(workspace: Workspace, options: list[dict[str, Any]], as_fields: bool = False) -> None:
    eval_profile(workspace, repetitions=1, judges=[
        {"judge_id": f"j{index}", "type": "llm_probe", "model": JUDGE, "retries": 0,
         **(opts if as_fields else {"request_options": opts})} for index, opts in enumerate(options)],
        judge_runs=[{"judge_run_id": "main", "judge_id": "j0", "repetitions": 1}])


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def test_validate_warns_of_each_option_that_leaves_no_verdict(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    _judges(ws, [options for options, _, _ in WARNED])
    code, out, err = claw("validate")
    assert code == 0 and out.startswith("OK:"), out + err
    said = _warnings(err)
    for index, (_, field, says) in enumerate(WARNED):
        prefix = f"warning: {PROFILE}: judges[{index}].request_options.{field}: "
        mine = [line for line in said if line.startswith(prefix)]
        assert len(mine) == 1 and says in mine[0], (prefix, says, said)
    assert len(said) == len(WARNED), said


def test_an_extra_judge_field_is_warned_of_under_its_own_name(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    _judges(ws, [{"max_tokens": 20}], as_fields=True)
    code, out, err = claw("validate")
    assert code == 0 and _warnings(err) == [
        f"warning: {PROFILE}: judges[0].max_tokens: " + _warnings(err)[0].split(".max_tokens: ", 1)[1]], err
    assert "cut at 20 tokens" in err


@pytest.mark.parametrize("options", QUIET, ids=lambda o: ",".join(o))
def test_options_that_leave_the_verdict_readable_are_not_warned_of(ws: Workspace, claw: Claw,  # noqa: F811
                                                                   options: dict[str, Any]) -> None:
    _judges(ws, [options])
    code, out, err = claw("validate")
    assert code == 0 and _warnings(err) == [], out + err


def test_a_build_says_it_before_the_first_judgement(ws: Workspace, claw: Claw, standin: StandIn) -> None:  # noqa: F811
    _judges(ws, [{"max_tokens": 20}])
    standin.script(JUDGE, *[judge_reply(7.0) for _ in range(8)])
    code, out, err = claw.build("--evaluation-profile", "ev")
    assert code == 0, out + err
    assert any(line.startswith(f"warning: {PROFILE}: judges[0].request_options.max_tokens: ")
               for line in _warnings(err)), err
    assert len(DIMS) == 6  # (the verdict the warning speaks of)
