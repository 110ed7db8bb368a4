"""The llm_probe runner end to end: real stand-in HTTP server, real sandbox, real bubblewrap."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.providers import Endpoint, ProviderClient
from clawstore.runners import LlmProbeSpec, RunArtifact, run_llm_probe, tools
from clawstore.testing.standin import StandIn, empty, error, hang, malformed, text, tool_call
from clawstore.values.canonical import canonical_json

KEY = "sk-or-v1-runner-test-secret-0000"
FILE_TOOLS = ["write_file", "read_file"]


@pytest.fixture
def endpoint(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> Endpoint:
    monkeypatch.setenv("CLAW_RUNNER_KEY", KEY)
    return Endpoint(standin.base_url, "CLAW_RUNNER_KEY")


def spec(endpoint: Endpoint, tools: list[str] | None = None, **kw: Any) -> LlmProbeSpec:
    fields: dict[str, Any] = {
        "case_id": "case_a", "requested_model": "m1", "endpoint": endpoint,
        "messages": [{"role": "system", "content": "You are careful."},
                     {"role": "user", "content": "Do the task."}],
        "tools": tools or [],
    }
    fields.update(kw)
    return LlmProbeSpec(**fields)


def events(artifact: RunArtifact, kind: str) -> list[dict[str, Any]]:
    return [e for e in artifact.trace if e["event_type"] == kind]


def test_plain_answer(standin: StandIn, client: ProviderClient, endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", text("4"))
    artifact = run_llm_probe(spec(endpoint), client, tmp_path)
    assert artifact.status == "success" and artifact.error is None
    assert artifact.final_output == "4"
    body = standin.requests[0]["body"]
    assert "tools" not in body and "tool_choice" not in body
    assert artifact.to_json()["request"]["execution_parameters"]["max_turns"] == 1


def test_write_then_read_then_answer(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                     tmp_path: Path) -> None:
    standin.script("m1",
                   tool_call("write_file", {"path": "notes/out.txt", "content": "marker-42\n"}),
                   tool_call("read_file", {"path": "/work/notes/out.txt"}),
                   text("The file says marker-42."))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS), client, tmp_path)
    assert artifact.status == "success", artifact.error
    assert artifact.final_output == "The file says marker-42."
    assert (tmp_path / "work/notes/out.txt").read_text() == "marker-42\n"
    results = events(artifact, "tool_result")
    assert [r["status"] for r in results] == ["success", "success"]
    assert results[0]["output"] == {"path": "/work/notes/out.txt", "bytes_written": 10}
    assert results[1]["output"]["content"] == "marker-42\n"
    data = artifact.to_json()
    assert [e["sequence"] for e in data["trace"]] == list(range(len(data["trace"])))
    assert all(e["timestamp"].endswith("Z") for e in data["trace"])
    assert [e["event_type"] for e in data["trace"]] == [
        "message", "message",
        "message", "tool_call", "tool_result", "message",
        "message", "tool_call", "tool_result", "message",
        "message", "final_output"]
    # The tool result went back to the model, and the conversation grew (never restarted).
    third = standin.requests[2]["body"]["messages"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert json.loads(third[-1]["content"]) == {"status": "success", "output": results[1]["output"]}
    assert third[2]["tool_calls"][0]["function"]["name"] == "write_file"
    # No answer text beside the calls: `content` is left out, not null (llama-cpp-python's server refuses
    # null with HTTP 500; OpenAI's API makes it optional beside tool_calls).
    assert "content" not in third[2]
    # Usage is the sum over all three calls; cost comes from the provider's usage.cost.
    raw = data["usage"]["raw_provider_usage"]
    assert len(raw) == 3
    assert data["usage"]["normalized"]["input_tokens"] == sum(r["prompt_tokens"] for r in raw)
    assert data["usage"]["cost_usd"] == pytest.approx(sum(r["cost"] for r in raw))
    assert data["runner_metadata"]["attempt_count"] == 3
    body = standin.requests[0]["body"]
    assert [t["function"]["name"] for t in body["tools"]] == FILE_TOOLS and body["tool_choice"] == "auto"
    # JSON-ready, hashable, and the key is nowhere in it.
    assert KEY not in canonical_json(data).decode()
    assert RunArtifact.from_json(data).to_json() == data


def test_absolute_tmp_paths_stay_in_the_sandbox(standin: StandIn, client: ProviderClient,
                                                endpoint: Endpoint, tmp_path: Path) -> None:
    name = f"claw-sandbox-test-{uuid.uuid4().hex}"
    standin.script("m1",
                   tool_call("write_file", {"path": f"/tmp/{name}.a", "content": "via file tool"}),
                   tool_call("exec_shell", {"command": f"echo via shell > /tmp/{name}.b; cat /tmp/{name}.a"}),
                   text("done"))
    artifact = run_llm_probe(spec(endpoint, ["write_file", "exec_shell"]), client, tmp_path)
    assert artifact.status == "success", artifact.error
    assert (tmp_path / f"tmp/{name}.a").read_text() == "via file tool"
    assert (tmp_path / f"tmp/{name}.b").read_text() == "via shell\n"
    assert not Path(f"/tmp/{name}.a").exists() and not Path(f"/tmp/{name}.b").exists()
    shell = events(artifact, "tool_result")[1]["output"]
    assert shell["stdout"] == "via file tool" and shell["returncode"] == 0
    # Only what the run wrote is left: no mount-point directories from the shell sandbox.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def test_shell_does_not_see_harness_secrets(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    standin.script("m1", tool_call("exec_shell", {"command": "env; echo HOME=$HOME; pwd"}), text("ok"))
    artifact = run_llm_probe(spec(endpoint, ["exec_shell"]), client, tmp_path)
    output = events(artifact, "tool_result")[0]["output"]
    assert output["returncode"] == 0
    assert "OPENROUTER_API_KEY" not in output["stdout"] and KEY not in output["stdout"]
    assert "HOME=/work" in output["stdout"] and output["stdout"].rstrip().endswith("/work")
    assert KEY not in canonical_json(artifact.to_json()).decode()


@pytest.mark.parametrize("network", [False, True])
def test_shell_network_follows_the_policy(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                          tmp_path: Path, network: bool) -> None:
    probe = f"curl -sS -o /dev/null -w '%{{http_code}}' --max-time 3 {standin.url}/_admin/health"
    standin.script("m1", tool_call("exec_shell", {"command": probe}), text("ok"))
    artifact = run_llm_probe(spec(endpoint, ["exec_shell"], network=network), client, tmp_path)
    output = events(artifact, "tool_result")[0]["output"]
    if network:
        assert output["returncode"] == 0 and output["stdout"] == "200"
    else:
        assert output["returncode"] != 0 and "200" not in output["stdout"]


@contextlib.contextmanager
def _search_engine(page: bytes) -> Iterator[str]:
    """A search engine on 127.0.0.1 answering every query with `page`; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client may stop reading early
                self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/html/"
    finally:
        server.shutdown()
        server.server_close()


def test_web_search_results_are_scraped_from_the_page(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = (b'<div><a rel="nofollow" class="result__a" href="https://example.org/a?x=1&amp;y=2">The <b>first</b> '
            b'&amp; best</a></div><a class="other" href="https://no/">no</a>'
            b'<a class="result__a" href="https://example.org/b">Second</a>')
    standin.script("m1", tool_call("web_search", {"query": "clawstore"}), text("found"))
    with _search_engine(page) as url:
        monkeypatch.setattr(tools, "SEARCH_URL", url)
        artifact = run_llm_probe(spec(endpoint, ["web_search"], network=True), client, tmp_path)
    output = events(artifact, "tool_result")[0]["output"]
    assert output["results"] == [{"title": "The first & best", "url": "https://example.org/a?x=1&y=2"},
                                 {"title": "Second", "url": "https://example.org/b"}]


def test_a_hostile_search_page_is_read_in_bounded_time_and_memory(standin: StandIn, client: ProviderClient,
                                                                  endpoint: Endpoint, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # 12 MB of result links that never close: the page was read whole, and the scraping pattern's
    # `(.*?)</a>` ran to its end from each of them (hours).
    page = b'<a class="result__a" href="https://example.org/">x' * 240_000
    standin.script("m1", tool_call("web_search", {"query": "clawstore"}), text("found"))
    with _search_engine(page) as url:
        monkeypatch.setattr(tools, "SEARCH_URL", url)
        started = time.monotonic()
        artifact = run_llm_probe(spec(endpoint, ["web_search"], network=True), client, tmp_path)
    assert time.monotonic() - started < 20
    assert events(artifact, "tool_result")[0]["output"]["results"] == []


def test_web_search_without_network_is_a_tool_error(standin: StandIn, client: ProviderClient,
                                                    endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", tool_call("web_search", {"query": "clawstore"}), text("no results"))
    artifact = run_llm_probe(spec(endpoint, ["web_search"]), client, tmp_path)
    result = events(artifact, "tool_result")[0]
    assert result["status"] == "error" and "network access is disabled" in result["output"]["error"]
    assert artifact.status == "success"


def test_tools_the_case_did_not_enable_are_refused(standin: StandIn, client: ProviderClient,
                                                   endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1",
                   tool_call("exec_shell", {"command": "touch /work/pwned"}),
                   tool_call("delete_everything", {}),
                   text("gave up"))
    artifact = run_llm_probe(spec(endpoint, ["read_file", "not_a_tool"]), client, tmp_path)
    results = events(artifact, "tool_result")
    assert results[0]["status"] == "error"
    assert results[0]["output"]["error"] == "Tool 'exec_shell' is not enabled for this case"
    assert results[1]["output"]["error"] == "Unsupported tool 'delete_everything'"
    assert not (tmp_path / "work/pwned").exists()
    assert [t["function"]["name"] for t in standin.requests[0]["body"]["tools"]] == ["read_file"]
    assert artifact.status == "success"


def test_bad_tool_arguments_are_a_tool_error(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                             tmp_path: Path) -> None:
    standin.script("m1", tool_call("read_file", "{not json"), tool_call("read_file", {"file": "x"}),
                   text("ok"))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS), client, tmp_path)
    results = events(artifact, "tool_result")
    assert [r["output"]["error_type"] for r in results] == ["invalid_arguments", "invalid_arguments"]
    assert events(artifact, "tool_call")[0]["parsed_arguments"] is None


def test_max_turns_exceeded_is_the_models_incomplete_outcome(standin: StandIn, client: ProviderClient,
                                                             endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", tool_call("read_file", {"path": "/nowhere"}))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS, settings={"max_turns": 3}), client, tmp_path)
    assert artifact.status == "incomplete"
    assert artifact.error is not None and artifact.error.code == "max_turns_exceeded"
    assert artifact.error.error_type == "output_error"
    assert "max_turns=3" in artifact.error.message
    assert len(standin.requests) == 3
    assert events(artifact, "final_output") == []
    assert len(events(artifact, "tool_result")) == 3  # the conversation so far is kept for the judge


def test_unknown_tool_name_is_a_tool_error_the_model_sees(standin: StandIn, client: ProviderClient,
                                                         endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", tool_call("teleport", {"to": "mars"}), text("done"))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS), client, tmp_path)
    assert artifact.status == "success" and artifact.final_output == "done"
    assert [r["output"]["error_type"] for r in events(artifact, "tool_result")] == ["unsupported_tool"]
    sent = standin.requests[1]["body"]["messages"][-1]
    assert sent["role"] == "tool" and "Unsupported tool 'teleport'" in sent["content"]


@pytest.mark.parametrize("forced", ["required", {"type": "function", "function": {"name": "write_file"}}])
def test_a_forced_tool_choice_is_obeyed_once_then_the_model_may_answer(standin: StandIn, client: ProviderClient,
                                                                      endpoint: Endpoint, tmp_path: Path,
                                                                      forced: Any) -> None:
    """Forced on every turn, the model could only call tools until max_turns: a failed run, paid for
    again by every build. Once it has called tools, the next turns let it choose (`auto`)."""
    standin.script("m1", tool_call("write_file", {"path": "a.txt", "content": "a"}),
                   tool_call("read_file", {"path": "a.txt"}), text("done"))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS, tool_choice=forced), client, tmp_path)
    assert artifact.status == "success", artifact.error
    assert [r["body"]["tool_choice"] for r in standin.requests] == [forced, "auto", "auto"]
    assert artifact.to_json()["request"]["execution_parameters"]["tool_choice"] == forced


def test_empty_answer_is_invalid(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                 tmp_path: Path) -> None:
    standin.script("m1", empty())
    artifact = run_llm_probe(spec(endpoint), client, tmp_path)
    assert artifact.status == "invalid" and artifact.error is not None
    assert artifact.error.code == "empty_output"
    assert artifact.usage.total_tokens > 0  # a valid, paid-for answer


def test_tool_calls_without_enabled_tools_are_invalid(standin: StandIn, client: ProviderClient,
                                                      endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", tool_call("exec_shell", {"command": "touch /work/x"}))
    artifact = run_llm_probe(spec(endpoint), client, tmp_path)
    assert artifact.status == "invalid" and artifact.error is not None
    assert artifact.error.code == "tool_calls_not_supported"
    assert not (tmp_path / "work/x").exists() and len(standin.requests) == 1


def test_hang_is_timed_out(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                           tmp_path: Path) -> None:
    standin.script("m1", hang())
    settings = {"timeout_seconds": 0.3, "retries": 1}
    artifact = run_llm_probe(spec(endpoint, settings=settings), client, tmp_path)
    assert artifact.status == "timed_out" and artifact.error is not None
    assert artifact.error.code == "timeout" and artifact.error.retryable
    assert len(standin.requests) == 2 and artifact.runner_metadata["attempt_count"] == 2


def test_exhausted_500_is_provider_error_with_cost(standin: StandIn, client: ProviderClient,
                                                   endpoint: Endpoint, tmp_path: Path) -> None:
    spent = {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5, "cost": 0.002}
    standin.script("m1", error(500, "overloaded", usage=spent))
    artifact = run_llm_probe(spec(endpoint, settings={"retries": "2"}), client, tmp_path)
    assert artifact.status == "provider_error" and artifact.error is not None
    assert (artifact.error.code, artifact.error.metadata["status_code"]) == ("http_error", 500)
    assert len(standin.requests) == 3
    assert artifact.usage.cost_usd == pytest.approx(0.006) and artifact.usage.input_tokens == 15
    assert [e["name"] for e in events(artifact, "runner")] == [
        "provider_retry", "provider_retry", "provider_error", "run_failed"]


def test_a_failed_request_is_retried_without_restarting(standin: StandIn, client: ProviderClient,
                                                        endpoint: Endpoint, tmp_path: Path) -> None:
    standin.script("m1", tool_call("exec_shell", {"command": "echo run >> /work/count"}),
                   error(502, "blip"), text("done"))
    artifact = run_llm_probe(spec(endpoint, ["exec_shell"]), client, tmp_path)
    assert artifact.status == "success", artifact.error
    assert (tmp_path / "work/count").read_text() == "run\n"  # the tool ran once
    assert artifact.runner_metadata == {**artifact.runner_metadata, "attempt_count": 3, "provider_calls": 2}
    assert [e["name"] for e in events(artifact, "runner")] == ["provider_retry"]


def test_request_body_from_settings(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                    tmp_path: Path) -> None:
    standin.script("m1", text("ok"))
    settings = {"temperature": "0.2", "top_p": 1, "max_tokens": "256", "seed": True, "timeout_seconds": 9,
                "tool_choice": "required", "unrelated_setting": "x"}
    messages = [{"role": "user", "content": "hi", "name": "alice",
                 "metadata": {"attachment": {"name": "a.txt", "byte_size": 3}}}]
    artifact = run_llm_probe(spec(endpoint, ["read_file"], settings=settings, messages=messages,
                                  tool_choice={"type": "function", "function": {"name": "read_file"}}),
                             client, tmp_path)
    body = standin.requests[0]["body"]
    assert body["model"] == "m1"
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.2, 1.0, 256, 1)
    assert body["messages"] == [{"role": "user", "content": "hi", "name": "alice"}]  # metadata stays local
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert "unrelated_setting" not in body
    params = artifact.to_json()["request"]["execution_parameters"]
    assert params == {"temperature": 0.2, "top_p": 1.0, "max_tokens": 256, "seed": 1, "max_turns": 8,
                      "timeout_seconds": 9.0, "retries": 5,
                      "tool_choice": {"type": "function", "function": {"name": "read_file"}}}
    assert artifact.trace[0]["metadata"] == {"attachment": {"name": "a.txt", "byte_size": 3}}


def test_missing_key_fails_without_requests(standin: StandIn, client: ProviderClient, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_NO_SUCH_KEY", raising=False)
    artifact = run_llm_probe(spec(Endpoint(standin.base_url, "CLAW_NO_SUCH_KEY")), client, tmp_path)
    assert artifact.status == "failed" and artifact.error is not None
    assert artifact.error.code == "runner_configuration_error" and "CLAW_NO_SUCH_KEY" in artifact.error.message
    assert standin.requests == []


@pytest.mark.parametrize("kw,code,status", [
    ({"messages": []}, "invalid_messages", "invalid"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "invalid_messages", "invalid"),
    ({"settings": {"max_tokens": "lots"}}, "runner_configuration_error", "failed"),
    ({"settings": {"max_turns": 0}}, "runner_configuration_error", "failed"),
    ({"settings": {"timeout_seconds": "0"}}, "runner_configuration_error", "failed"),
])
def test_unusable_inputs(standin: StandIn, client: ProviderClient, endpoint: Endpoint, tmp_path: Path,
                         kw: dict[str, Any], code: str, status: str) -> None:
    artifact = run_llm_probe(spec(endpoint, **kw), client, tmp_path)
    assert artifact.status == status and artifact.error is not None and artifact.error.code == code
    assert standin.requests == []


def _stable(data: dict[str, Any]) -> dict[str, Any]:
    """The artifact minus what legitimately differs between two runs: ids and timing."""
    data = json.loads(json.dumps(data))
    data["identity"].pop("run_id")
    data.pop("timing")
    for key in ("request_id", "response_id"):
        data["provider"].pop(key)
    data["provider"]["metadata"].pop("created")
    for event in data["trace"]:
        event.pop("timestamp")
    return data


def test_artifact_is_deterministic_apart_from_ids_and_timing(standin: StandIn, client: ProviderClient,
                                                             endpoint: Endpoint, tmp_path: Path) -> None:
    replies = [tool_call("write_file", {"path": "/tmp/a", "content": "x"}),
               tool_call("exec_shell", {"command": "cat /tmp/a"}), text("x it is")]
    probe = spec(endpoint, ["write_file", "exec_shell"])
    standin.script("m1", *replies)
    first = run_llm_probe(probe, client, tmp_path / "one").to_json()
    standin.reset()
    standin.script("m1", *replies)
    second = run_llm_probe(probe, client, tmp_path / "two").to_json()
    assert first["identity"]["run_id"] != second["identity"]["run_id"]
    assert canonical_json(_stable(first)) == canonical_json(_stable(second))


def test_spec_json_names_the_endpoint_not_the_key(endpoint: Endpoint) -> None:
    data = spec(endpoint, FILE_TOOLS).to_json()
    assert data["endpoint"] == {"base_url": endpoint.base_url}
    assert KEY not in canonical_json(data).decode()


# How real servers refuse a conversation grown past the model's context, each after an answered tool turn: llama.cpp's
# llama-server (its `type`), OpenAI (its `code`), vLLM, llama-cpp-python and Ollama (their messages).
OUTGREW = {
    "llama-server": {"error": {"code": 400, "message": "request (4476 tokens) exceeds the available context size "
                               "(4096 tokens), try increasing it", "type": "exceed_context_size_error",
                               "n_prompt_tokens": 4476, "n_ctx": 4096}},
    "openai": {"error": {"message": "Your input exceeds the context window of this model. Please adjust your input "
                         "and try again.", "type": "invalid_request_error", "param": "input",
                         "code": "context_length_exceeded"}},
    "vllm": {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you "
             "requested 2100 tokens (2000 in the messages, 100 in the completion).", "type": "BadRequestError",
             "param": None, "code": 400},
    "llama-cpp-python": {"error": {"message": "Requested tokens (2100) exceed context window of 2048",
                                   "type": "invalid_request_error", "code": "context_length_exceeded"}},
    "ollama": {"error": {"message": "the input length exceeds the context length", "type": "api_error"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error",
                                             "message": "prompt is too long: 208310 tokens > 200000 maximum"}},
    "anthropic max_tokens": {"type": "error", "error": {
        "type": "invalid_request_error", "message": "input length and `max_tokens` exceed context limit: 179413 + "
        "32768 > 200000, decrease input length or `max_tokens` and try again"}},
    "413 gateway": {"error": {"message": "This endpoint's maximum context length is 8192 tokens. However, you "
                              "requested about 9120 tokens (9020 of text input, 100 in the output).", "code": 413}},
}


# Refusals after an answered turn that are none for length, though their text says "context length" or "too large": a
# vLLM validation error echoing the message it refused (a file the model read), an unknown parameter named so, and the
# 413s below. Kept as the model's outcome, the run would never be asked again.
NOT_OUTGREW: dict[str, dict[str, Any] | str] = {
    "echoed input": {"object": "error", "message": "[{'type': 'string_type', 'loc': ('body', 'messages', 2, "
                     "'content'), 'msg': 'Input should be a valid string', 'input': 'notes: keep the context "
                     "length small, the context window is shared'}]", "type": "BadRequestError", "code": 400},
    "parameter": {"error": {"message": "Unrecognized request argument supplied: context_length",
                            "type": "invalid_request_error", "code": None}},
    # Anthropic's words, quoted from a file the model read, not at the start of the message as Anthropic's own are
    "echoed prompt": {"error": {"message": "messages.2.content: Input should be a valid string, input: 'log: prompt "
                                "is too long: 208310 tokens > 200000 maximum'", "type": "invalid_request_error"}},
    # 413s for the request's bytes, not the model's context: a proxy's limit (nginx's page; OpenRouter's host's plain
    # text) or Anthropic's 32 MB, which a setting or a smaller file read changes; asked again, they may be answered
    "nginx 413": "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 "
                 "Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
    "plain 413": "Request Entity Too Large\n\nFUNCTION_PAYLOAD_TOO_LARGE\n",
    "anthropic 413": {"type": "error", "error": {"type": "request_too_large",
                                                 "message": "Request exceeds the maximum allowed number of bytes."}},
}
# The HTTP status of each body above (400 unless named): a server may send a refusal for length as 413, Payload Too
# Large (vLLM's pull request 34363 proposes it), and a proxy sends its own 413 for a body it will not take.
STATUS = {"413 gateway": 413, "nginx 413": 413, "plain 413": 413, "anthropic 413": 413}



@pytest.mark.parametrize("name", sorted(OUTGREW) + sorted(NOT_OUTGREW))
def test_a_loop_refused_as_longer_than_the_context_is_the_models_outcome(standin: StandIn, client: ProviderClient,
                                                                        endpoint: Endpoint, tmp_path: Path,
                                                                        name: str) -> None:
    """A refusal for length after an answered tool turn is the model's outcome (incomplete, kept); a 400 that merely
    mentions a context stays a provider error (asked again)."""
    body = OUTGREW.get(name) or NOT_OUTGREW[name]
    standin.script("m1", tool_call("write_file", {"path": "a.txt", "content": "a"}),
                   malformed(body if isinstance(body, str) else json.dumps(body), status=STATUS.get(name, 400)))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS, settings={"retries": 0}), client, tmp_path)
    assert artifact.error is not None
    if name in OUTGREW:
        assert artifact.status == "incomplete", artifact.error
        assert (artifact.error.code, artifact.error.error_type) == ("context_length_exceeded", "output_error")
    else:
        assert artifact.status == "provider_error", artifact.error
        assert artifact.error.metadata["status_code"] == STATUS.get(name, 400)


def test_a_tool_loop_whose_turn_reported_no_cost_keeps_the_other_turns_cost_as_its_known_part(
        standin: StandIn, client: ProviderClient, endpoint: Endpoint, tmp_path: Path) -> None:
    """A turn that counted tokens and reported no cost beside one that reported its cost: the run's cost is no
    reported figure (priced, else unknown), `≥` the reported part (docs/building.md, "Costs"), as a judgement's
    attempts keep theirs (evaluate/judge.py). Before session 74 the run's believed answers were summed as one usage,
    whose cost that turn made None: its known part was dropped, the run read `?`."""
    standin.script("m1", tool_call("write_file", {"path": "a.txt", "content": "x"}, usage={"cost": None}),
                   text("done", usage={"cost": 0.000125}))
    artifact = run_llm_probe(spec(endpoint, FILE_TOOLS), client, tmp_path)
    assert artifact.status == "success", artifact.error
    usage = artifact.to_json()["usage"]
    assert usage["cost_usd"] is None and usage["cost_known_usd"] == 0.000125, usage
    assert "input_tokens_known" not in usage  # (its tokens are known: they are the run's)


def test_each_reply_s_usage_is_read_once(standin: StandIn, client: ProviderClient, endpoint: Endpoint,
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client reads an answer's `usage` (ChatResult.own_usage); the runner and the judge take it from there. Before
    session 74 each read it again from `raw_usage`: two parses a request."""
    from clawstore.evaluate.judge import run_judge_iteration
    from clawstore.providers.usage import Usage

    read = Usage.from_raw.__func__  # type: ignore[attr-defined]
    calls: list[object] = []

    def counted(cls: type[Usage], raw: Any) -> Usage:
        calls.append(raw)
        return read(cls, raw)  # type: ignore[no-any-return]

    monkeypatch.setattr(Usage, "from_raw", classmethod(counted))
    standin.script("m1", tool_call("write_file", {"path": "a.txt", "content": "x"}), text("done"))
    assert run_llm_probe(spec(endpoint, FILE_TOOLS), client, tmp_path).status == "success"
    standin.script("j", text('{"overall_score": 7, "dimensions": {}, "rationale": "ok"}'))
    run_judge_iteration(lambda body: client.chat(endpoint, body, timeout=10, retries=0),
                        {"model": "j", "messages": [{"role": "user", "content": "judge"}]}, attempts=1)
    assert len(standin.requests) == 3 and len(calls) == 3, calls
