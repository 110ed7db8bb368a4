"""claw against a real third-party OpenAI-compatible server: llama-cpp-python's, with a tiny model.

The server (tests/realserver/llama_server.py) runs once for the tier on 127.0.0.1 with a model the
tests write (tiny_model.py), behind a logging relay that counts claw's requests and keeps the
server's replies. Skipped with the reason when llama-cpp-python is not installed; under CI=true that
is a failure (.ci/run installs it). llama.cpp never answers 429: the relay answers it in the server's place
(tests/realserver/test_killed_builds.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from clawstore.providers import Endpoint, ProviderClient
from clawstore.store import Store
from clawstore.store.trees import checkout
from tests.realserver.campaign import KEY_ENV, MODEL, VERDICT_SCHEMA, build, is_judge, judged_workspace, records
from tests.realserver.conftest import N_CTX
from tests.realserver.llama_server import LlamaServer
from tests.realserver.relay import Relay
from tests.support.claw import Claw
from tests.support.wire_paths import reply_paths
from tests.support.workspace import Workspace

FORCED = {"type": "function", "function": {"name": "write_file"}}


@pytest.fixture
def ws(tmp_path: Path, relay: Relay, server_env: None, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """One case, one model on the server, one judge on the same server answering by the schema."""
    workspace = judged_workspace(tmp_path / "ws", relay.base_url, {"hello": "Say hello."})
    monkeypatch.chdir(workspace.root)
    return workspace


@pytest.fixture
def claw(ws: Workspace) -> Claw:
    return Claw(ws.root)


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


def test_an_answer_slower_than_the_timeout_is_a_timed_out_run_of_unknown_cost_asked_again(
        ws: Workspace, claw: Claw, relay: Relay) -> None:
    """The server writes 600 tokens (about a second here) and the profile waits 0.2 s: the user reads one line, the run
    is `timed_out` with its tokens and cost unknown (the server went on and counted the answer nobody read: never 0),
    and the next build, with a timeout that fits, asks again (a timeout is in no run's key). Session 78: the tier had
    no timeout against the real server."""
    ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(timeout_seconds=0.2, retries=0,
                                                                           max_tokens=600))
    code, report = build(claw)
    assert code == 1
    [row] = report["rows"]
    assert (row["status"], row["run"], row["cost_usd"]) == ("timed_out", "fail", None), row
    assert "no complete response from" in row["error"] and "within 0.2s" in row["error"], row["error"]
    [run] = records("run")
    assert run.status == "timed_out" and run.cacheable is False
    assert (run.metrics.input_tokens, run.metrics.output_tokens, run.metrics.cost_usd) == (None, None, None)
    assert run.metrics.cost_source == "unknown"
    relay.settle()  # (the relay waits for the server, which finished the answer claw gave up on)
    [unread] = relay.chats()
    assert unread["status"] == 200 and unread["response"]["usage"]["completion_tokens"] > 0
    ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(timeout_seconds=60))
    code, out, err = claw.build("--output", "json")  # (runs only: a judge's prompt holding 600 tokens is over n_ctx)
    [row] = json.loads(out)["rows"]
    assert code == 0 and (row["status"], row["run"]) == ("success", "exec"), out + err
    assert [is_judge(c) for c in relay.chats()] == [False, False]


def test_the_servers_own_replies_are_read_without_h11_as_httpx_reads_them(llama: LlamaServer,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # (the tier's builds talk to the relay: this is llama.cpp's own head, kept alive, read by claw's wire)
    monkeypatch.setenv(KEY_ENV, llama.api_key)
    taken = reply_paths(monkeypatch)
    endpoint = Endpoint(llama.base_url, KEY_ENV)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8,
            "temperature": 0, "seed": 1}
    with ProviderClient() as wire, ProviderClient(transport=httpx.HTTPTransport()) as through_httpx:
        found = [[(r.message, r.raw_usage) for r in (c.chat(endpoint, body, timeout=60, retries=0) for _ in range(2))]
                 for c in (wire, through_httpx)]
        assert wire._clients[0].wire is not None
    assert found[0] == found[1] and found[0][0][1]["completion_tokens"] > 0
    assert taken == ["plain", "plain"]
