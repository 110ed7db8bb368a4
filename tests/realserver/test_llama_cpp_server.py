"""claw against a real third-party OpenAI-compatible server: llama-cpp-python's, with a tiny model.

The server (tests/realserver/llama_server.py) runs once per module on 127.0.0.1 with a model the
tests write (tiny_model.py), behind a logging relay that counts claw's requests and keeps the
server's replies. Skipped with the reason when llama-cpp-python is not installed; under CI=true that
is a failure (.ci/run installs it). llama.cpp never answers 429, so retries are not tested here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from clawstore.evaluate.evidence import DIMENSIONS
from clawstore.store import Store
from clawstore.store.trees import checkout
from tests.realserver.conftest import API_KEY, N_CTX
from tests.realserver.relay import Relay
from tests.support.claw import Claw
from tests.support.workspace import Workspace, write_yaml

KEY_ENV = "CLAW_TEST_LLAMA_KEY"
MODEL = "tiny"
FORCED = {"type": "function", "function": {"name": "write_file"}}


def _scored() -> dict[str, Any]:
    # Short lowercase words and whole scores: what the verdict contract accepts, and bounded, so a
    # model with random weights cannot write one string forever.
    word = {"type": "string", "pattern": "^[a-z]{1,12}$"}
    return {"type": "object", "additionalProperties": False, "required": ["evidence", "score"],
            "properties": {"evidence": {"type": "array", "items": word, "minItems": 1, "maxItems": 2},
                           "score": {"enum": list(range(11))}}}


# The verdict contract (clawstore/evaluate/judge_contract.py) as a JSON schema. llama-cpp-python's
# server turns `response_format: {type: json_object, schema: …}` into a grammar the reply must follow.
VERDICT_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["summary", "dimensions", "overall"],
    "properties": {
        "summary": {"type": "string", "pattern": "^[a-z]{1,12}$"},
        "dimensions": {"type": "object", "additionalProperties": False, "required": list(DIMENSIONS),
                       "properties": {d: _scored() for d in DIMENSIONS}},
        "overall": _scored(),
    },
}


@pytest.fixture
def ws(tmp_path: Path, relay: Relay, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """One case, one model on the server, one judge on the same server answering by the schema."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    workspace = Workspace(tmp_path / "ws")
    endpoint = {"base_url": relay.base_url, "api_key_env": KEY_ENV}
    workspace.case("hello", "Say hello.")
    workspace.suite("main", ["tiny"])
    workspace.edit("suites/main.yaml", lambda d: d["models"][0].update(requested_model=MODEL, **endpoint))
    workspace.run_profile(defaults={"timeout_seconds": 60, "retries": 2, "max_tokens": 48})
    write_yaml(workspace.configs / "evaluation_profiles" / "ev.yaml", {
        "schema_version": 1, "evaluation_profile_id": "ev", "title": "Eval",
        "judge_system_prompt": "You are a strict judge. Answer in JSON.",
        "judges": [{"judge_id": "j1", "type": "llm_probe", "model": MODEL, **endpoint, "retries": 2,
                    "request_options": {"max_tokens": 1024,
                                        "response_format": {"type": "json_object", "schema": VERDICT_SCHEMA}}}],
        "judge_runs": [{"judge_run_id": "main", "judge_id": "j1", "repetitions": 1}],
        "aggregation": {"method": "median", "pass_threshold": 0.5},
    })
    monkeypatch.chdir(workspace.root)
    return workspace


@pytest.fixture
def claw(ws: Workspace) -> Claw:
    return Claw(ws.root)


def build(claw: Claw, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json", *extra)
    assert out, err
    return code, json.loads(out)


def records(kind: str) -> list[dict[str, Any]]:
    store = Store(Path(os.environ["CLAW_STORE"]))
    found = [store.get_action(key) for key, _ in store.iter_actions()]
    return [r for r in found if r and r.kind == kind]


def is_judge(exchange: dict[str, Any]) -> bool:
    return "response_format" in exchange["request"]


def test_a_build_is_judged_by_the_schema_and_a_rebuild_sends_nothing(claw: Claw, relay: Relay) -> None:
    code, report = build(claw)
    assert code == 0, report
    [row] = report["rows"]
    assert (row["status"], row["run"], row["eval"]) == ("success", "exec", "exec")
    chats = relay.chats()
    assert [is_judge(c) for c in chats] == [False, True] and {c["status"] for c in chats} == {200}
    assert chats[1]["request"]["response_format"] == {"type": "json_object", "schema": VERDICT_SCHEMA}
    verdict = json.loads(chats[1]["response"]["choices"][0]["message"]["content"])
    assert row["score"] == verdict["overall"]["score"] and row["passed"] is (verdict["overall"]["score"] >= 5)
    code, report = build(claw)
    assert code == 0, report
    assert (report["rows"][0]["run"], report["rows"][0]["eval"]) == ("reuse", "reuse")
    assert len(relay.exchanges) == 2  # nothing was asked twice


def test_recorded_tokens_are_the_servers_usage_and_the_cost_is_unknown(claw: Claw, relay: Relay) -> None:
    code, report = build(claw)
    assert code == 0, report
    usage = {judge: [c["response"]["usage"] for c in relay.chats() if is_judge(c) == judge] for judge in (False, True)}
    [run], [judgement] = records("run"), records("judge")
    for record, replies in ((run, usage[False]), (judgement, usage[True])):
        assert record.metrics.input_tokens == sum(u["prompt_tokens"] for u in replies) > 0
        assert record.metrics.output_tokens == sum(u["completion_tokens"] for u in replies) > 0
        # The server reports no price, so the cost is unknown: not a number, and certainly not 0.
        assert all("cost" not in u for u in replies)
        assert record.metrics.cost_usd is None and record.metrics.cost_source == "unknown"
    assert report["rows"][0]["cost_usd"] is None
    assert report["metrics"]["cost_usd"] is None and report["metrics"]["cost_unknown"] == 2, report["metrics"]
    code, out, _ = claw("query", "select cost_usd, cost_source from runs union all "
                        "select cost_usd, cost_source from judgements", "--format", "json")
    assert code == 0 and json.loads(out) == [{"cost_usd": None, "cost_source": "unknown"}] * 2, out


def test_a_forced_tool_choice_runs_a_real_tool_loop(ws: Workspace, claw: Claw, relay: Relay, tmp_path: Path) -> None:
    ws.edit("cases/hello/test.yaml", lambda d: d["input"].update(
        context={"llm_probe": {"tools": ["write_file"], "tool_choice": FORCED}}))
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    first, second = relay.chats()
    assert first["request"]["tool_choice"] == FORCED and second["request"]["tool_choice"] == "auto"
    [call] = first["response"]["choices"][0]["message"]["tool_calls"]
    arguments = json.loads(call["function"]["arguments"])  # the server held the model to the tool's schema
    assert call["function"]["name"] == "write_file" and set(arguments) == {"path", "content"}
    assert second["request"]["messages"][-1]["role"] == "tool"
    [run] = records("run")
    assert run.status == "success"
    checkout(Store(Path(os.environ["CLAW_STORE"])), run.outputs["sandbox"], tmp_path / "sandbox")
    written = [p.relative_to(tmp_path / "sandbox") for p in (tmp_path / "sandbox").rglob("*") if p.is_file()]
    assert written == [Path("work", arguments["path"])]  # the tool ran, in the run's sandbox
    assert (tmp_path / "sandbox" / written[0]).read_text() == arguments["content"]


def test_a_prompt_over_the_servers_context_is_a_clear_failed_run(ws: Workspace, claw: Claw, relay: Relay) -> None:
    ws.case("hello", "Say hello. " * (N_CTX // 10))  # over n_ctx: byte tokens, one per character
    code, report = build(claw)
    assert code == 1
    [row] = report["rows"]
    [exchange] = relay.chats()  # a 400 is not retried: the same prompt would fail again
    assert exchange["status"] == 400
    assert row["status"] == "provider_error" and row["run"] == "fail"
    assert "HTTP 400" in row["error"] and f"maximum context length is {N_CTX}" in row["error"], row["error"]
    [run] = records("run")
    assert run.status == "provider_error" and run.cacheable is False
    code, out, err = claw.build("--evaluation-profile", "ev")  # not cached: the next build asks again
    assert code == 1 and len(relay.chats()) == 2
    assert "maximum context length" in out and "Traceback" not in out + err
