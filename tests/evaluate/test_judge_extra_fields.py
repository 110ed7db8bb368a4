"""The config reference: "any extra judge fields are passed through as request_options". A judge written with
`temperature` or `reasoning` beside its model sends them, as `request_options` does; the fields clawstore reads
itself (model choice, prices, batch, endpoint, transport) are never sent; a field given both ways, or `messages` as
an extra, is refused by `claw validate` naming the file and the field."""

from __future__ import annotations

from typing import Any

import pytest

from clawstore.evaluate import build_judge_request
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

OWN = {"judge_model": "a/b", "pricing": {"input": 1, "output": 2}, "timeout_seconds": 30, "retries": 0,
       "batch": False, "api_key_env": "JUDGE_KEY", "base_url": "http://127.0.0.1:9/v1"}


def test_extra_fields_go_into_the_request_and_request_options_win() -> None:
    body = build_judge_request({"judge_id": "j", "model": "m/x", "temperature": 0.7, "reasoning": {"effort": "none"},
                                "request_options": {"verbosity": "low"}, **OWN}, "s", "u", 0)
    assert body["temperature"] == 0.7 and body["reasoning"] == {"effort": "none"} and body["verbosity"] == "low"
    assert body["model"] == "m/x" and not set(OWN) & set(body), sorted(body)


def _judge(ws: Workspace, **fields: Any) -> None:  # noqa: F811
    eval_profile(ws, repetitions=1, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                                             **fields}])


def test_a_build_sends_a_judge_s_extra_fields(ws: Workspace, claw: Claw, standin: StandIn) -> None:  # noqa: F811
    _judge(ws, temperature=0.3, reasoning={"effort": "low"}, timeout_seconds=60)
    standin.script(JUDGE, *[judge_reply(7.0) for _ in range(8)])
    code, out, err = claw.build("--evaluation-profile", "ev")
    assert code == 0, err
    sent = [r["body"] for r in standin.requests if r["model"] == JUDGE]
    assert len(sent) == 4
    assert all(b["temperature"] == 0.3 and b["reasoning"] == {"effort": "low"} for b in sent), sent[0]
    assert all("timeout_seconds" not in b and "retries" not in b for b in sent)


@pytest.mark.parametrize("fields, field, said", [
    ({"temperature": 0.2, "request_options": {"temperature": 0.9}}, "temperature", "given twice"),
    ({"messages": []}, "messages", "not a request option"),
])
def test_validate_refuses_a_field_given_twice_or_the_judge_s_own(ws: Workspace, claw: Claw,  # noqa: F811
                                                                  fields: dict[str, Any], field: str,
                                                                  said: str) -> None:
    _judge(ws, **fields)
    code, out, err = claw("validate")
    assert code == 2, out + err
    [line] = [ln for ln in (out + err).splitlines() if "evaluation_profiles/ev.yaml" in ln]
    assert field in line and said in line, line
