"""A secret under a secret-named key in a tool call's arguments, a tool's output or a failure's detail never reaches
the judge: its prompt, the chat body stored with the judgement (`outputs.request`) or the evidence it is made from.

Found in session 64: the arguments were turned into one JSON text before redaction, so the key-name rule never saw
the key, and the `name=value` text rule wants a letter in the value: `{"password": "123456"}` reached the judge as it
was. Values here are number-only, short, JSON-escaped, nested, given as an object and as a JSON string."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.evaluate import JudgeTarget, build_judge_evidence, build_judge_request, render_judge_prompt
from clawstore.evaluate.redact import REDACTED, holds_no_secret, redact_text, redact_value
from clawstore.store import Store
from clawstore.testing.standin import StandIn
from clawstore.testing.standin import text as standin_text
from clawstore.testing.standin import tool_call as standin_tool_call
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.judging import JUDGE, build, eval_profile, judge_reply
from tests.support.workspace import Workspace

from .helpers import artifact, final, tool_call, tool_result

TARGET = JudgeTarget(task_messages=[{"role": "user", "name": None, "content": "Log in and fetch the report."}])
JUDGE_CONFIG = {"judge_id": "j1", "model": "judge/model-1"}


def raw_call(call_id: str, tool: str, raw: str) -> dict[str, Any]:
    """A tool call whose arguments exist only as the JSON text the model wrote (they did not parse, or were kept so)."""
    return {"event_type": "tool_call", "call_id": call_id, "tool_name": tool, "raw_arguments": raw,
            "parsed_arguments": None, "metadata": {}}


# (trace events, the secret texts none of what the judge is shown may hold)
LEAKS: dict[str, tuple[list[dict[str, Any]], list[str]]] = {
    "number-only password": ([tool_call("c1", "login", {"user": "ann", "password": "580214"})], ["580214"]),
    "short api_key": ([tool_call("c1", "fetch", {"url": "https://example.org", "api_key": "7319"})], ["7319"]),
    "Authorization header": ([tool_call("c1", "http", {"headers": {"Authorization": "90473"}})], ["90473"]),
    "token": ([tool_call("c1", "http", {"token": "4411"})], ["4411"]),
    "nested": ([tool_call("c1", "db", {"conn": {"host": "db", "auth": {"password": "31337"}}})], ["31337"]),
    "number value": ([tool_call("c1", "login", {"password": 86420531})], ["86420531"]),
    "JSON-escaped value": ([tool_call("c1", "login", {"password": 'pw"q\\8866'})], ["8866", "pw"]),
    "arguments as a JSON string": ([raw_call("c1", "login", '{"user": "ann", "password": "246813"}')], ["246813"]),
    "escapes in a JSON string": ([raw_call("c1", "login", '{"password": "\\u0037\\u0035\\u0039\\u0031"}')],
                                 ["\\u0037", "7591"]),
    "a value cut by the arguments' limit": ([raw_call("c1", "login", '{"note": "' + "x" * 770
                                             + '", "password": "90817263"}')], ["9081"]),
    "a tool result's object": ([tool_call("c1", "env", {}), tool_result("c1", {"status": "success", "output":
                                {"api_key": "5150"}})], ["5150"]),
    "a tool's stdout holding JSON": ([tool_call("c1", "exec_shell", {"command": "cat creds.json"}),
                                      tool_result("c1", {"stdout": '{"password": "112358"}', "exit_code": 0})],
                                     ["112358"]),
    "a tool's text output holding JSON": ([tool_call("c1", "read_file", {"path": "creds.json"}),
                                           tool_result("c1", '{\n  "token": "9981"\n}')], ["9981"]),
}


def judged(events: list[dict[str, Any]], redact: bool = True) -> list[str]:
    """Everything the judge is shown or the store keeps of it: the evidence, the prompt and the chat body."""
    art = artifact(trace=[*events, final("Done.")])
    evidence = build_judge_evidence(art, redact_secrets=redact)
    prompt = render_judge_prompt(TARGET, evidence, [], None, redact_secrets=redact)
    body = build_judge_request(JUDGE_CONFIG, "You are a judge.", prompt, 0)
    return [json.dumps(evidence, ensure_ascii=False), prompt, json.dumps(body, ensure_ascii=False),
            json.dumps(body)]


@pytest.mark.parametrize("case", sorted(LEAKS))
def test_a_secret_named_value_never_reaches_the_judge(case: str) -> None:
    events, secrets = LEAKS[case]
    assert any(secrets[0] in text for text in judged(events, redact=False))  # (the test can fail)
    for text in judged(events):
        for secret in secrets:
            assert secret not in text, (case, secret, text)
    assert REDACTED in judged(events)[1]


def test_a_failure_detail_holding_json_is_redacted() -> None:
    art = artifact(status="failed", trace=[final("x")], error={
        "code": "runner_execution_failed", "message": "boom", "metadata": {"stderr": 'config: {"password": "60606"}'}})
    prompt = render_judge_prompt(TARGET, build_judge_evidence(art), [], None)
    assert "60606" not in prompt and f'"password": "{REDACTED}"' in prompt


def test_a_written_file_holding_json_is_redacted() -> None:
    art = artifact(trace=[tool_call("c1", "write_file", {"path": "/tmp/creds.json", "content": "see file"}),
                          final("Saved.")])
    evidence = build_judge_evidence(art, sandbox_files={"/tmp/creds.json": b'{"user": "ann", "password": "4321"}'})
    prompt = render_judge_prompt(TARGET, evidence, [], None)
    assert "4321" not in prompt and "4321" not in json.dumps(evidence) and f'"password": "{REDACTED}"' in prompt


def test_other_arguments_are_kept_as_they_were() -> None:
    prompt = judged([tool_call("c1", "login", {"user": "ann", "password": "580214", "max_tokens": 123456,
                                               "tokens": "31", "retries": 3})])[1]
    assert f'"max_tokens": 123456, "password": "{REDACTED}", "retries": 3, "tokens": "31", "user": "ann"' in prompt


@pytest.mark.parametrize(("text", "redacted"), [
    ('{"password": "123456"}', f'{{"password": "{REDACTED}"}}'),
    ('{"password":"12"}', f'{{"password":"{REDACTED}"}}'),
    ('{"Authorization" : 42}', f'{{"Authorization" : "{REDACTED}"}}'),
    ('{"db_password": "a\\"b\\\\"}, "x": 1', f'{{"db_password": "{REDACTED}"}}, "x": 1'),
    ('{"password": "1234\n… [truncated 9 chars]', f'{{"password": "{REDACTED}"\n… [truncated 9 chars]'),
    ('{"token": ""}', '{"token": ""}'),  # nothing there to hide
    ('{"tokens": "12", "max_tokens": 12}', '{"tokens": "12", "max_tokens": 12}'),  # not a secret's name
    ("token: 123456", "token: 123456"),  # a counter in free text, as before
])
def test_json_pairs_in_text_are_redacted_by_key_name(text: str, redacted: str) -> None:
    assert redact_text(text, []) == redacted


@pytest.mark.parametrize("value", [
    {"arguments": '{"password": "1234"}'},
    {"arguments": {"password": "1234"}},
    {"arguments": {"api_key": 1234}},
    ['{"Authorization": "12"}'],
])
def test_the_quick_look_does_not_pass_a_secret_named_value(value: Any) -> None:
    assert not holds_no_secret(value)
    assert "12" not in json.dumps(redact_value(value, []))


def test_a_pair_scan_over_hostile_text_is_linear() -> None:
    started = time.monotonic()
    for text in ['"' * 400_000 + " token", '"a":' * 100_000 + " token", '"password": "' * 40_000,
                 '"x":"\\' * 80_000 + " token", ('"' + "a" * 99) * 4_000 + " token",
                 '"x\\"' * 100_000 + " token"]:  # (every quote but the first escaped: a name from each, quadratic)
        redact_text(text, [])
    assert time.monotonic() - started < 5


def test_a_build_stores_and_sends_no_secret_named_value(ws: Workspace, claw: Claw,  # noqa: F811
                                                       standin: StandIn) -> None:
    # Through `claw build`: an llm_probe run's tool call holds {"password": "580214"}; the judge's request, as sent
    # and as stored with the judgement, holds no such value.
    ws.case("tools", "Log in.", input={"messages": [{"role": "user", "content": "Log in."}],
                                       "context": {"llm_probe": {"tools": ["exec_shell"]}}})
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["tools"]})
    eval_profile(ws, repetitions=1)
    standin.script("vendor/m1", standin_tool_call("exec_shell", {"command": "true", "password": "580214",
                                                                 "auth": {"api_key": 7319}}), standin_text("done"))
    standin.script(JUDGE, judge_reply(7))
    code, report = build(claw)
    assert code == 0, report
    sent = [json.dumps(r) for r in standin.requests if r["model"] == JUDGE]
    assert len(sent) == 1 and REDACTED in sent[0]
    store = Store(Path(os.environ["CLAW_STORE"]))
    judgement = next(r for r in (store.get_action(k) for k, _ in store.iter_actions()) if r.kind == "judge")
    stored = json.dumps(store.get_json(judgement.outputs["request"]))
    assert REDACTED in stored
    for secret in ("580214", "7319"):
        assert secret not in sent[0] and secret not in stored
    run = next(r for r in (store.get_action(k) for k, _ in store.iter_actions()) if r.kind == "run")
    assert "580214" in json.dumps(store.get_json(run.outputs["artifact"]))  # (the run keeps what the model sent)
