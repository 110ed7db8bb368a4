"""run_openclaw against a fake container CLI: statuses, timeouts, secrets, evidence, edge cases."""

from __future__ import annotations

import json
import os
import time

import pytest

from clawstore.runners.openclaw import agent_workspace_tree, run_openclaw
from clawstore.runners.openclaw.config import CONTAINER_KEY_ENV, config_bytes, render_config
from clawstore.runners.openclaw.transcript import jsonl_answers
from clawstore.store import Store
from clawstore.store.core.ids import oid_of
from tests.openclaw.conftest import KEY_ENV, SECRET, basic_agent, payload

pytestmark = pytest.mark.timeout(60)


def tree_files(store: Store, tree: str) -> dict[str, bytes]:
    return {e.path: store.get_bytes(e.object) for e in store.read_tree(tree) if e.type == "file"}


def all_object_bytes(store: Store) -> list[bytes]:
    return [store.get_bytes(oid) for oid in store.iter_objects()]


def test_single_turn_success_records_workspace_diff_and_key_output(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"write": {"report.md": "# Report\nmarker\n"},
                               "payload": payload("Created report.md.", tools=["write"])}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    art = outcome.artifact
    assert art["status"] == "success" and art["error"] is None
    files = tree_files(store, outcome.outputs["workspace"])
    assert files["report.md"] == b"# Report\nmarker\n"
    assert files["AGENTS.md"] == b"# Agents\nBe concise.\n"
    diff = store.get_bytes(outcome.outputs["workspace_diff"]).decode()
    assert "+++ workspace/report.md" in diff and "+marker" in diff
    assert "AGENTS.md" not in diff  # the diff is against the template tree: only what the run changed
    [ref] = art["output_artifacts"]
    assert ref["artifact_id"] == "openclaw_key_output_1" and ref["uri"] == "workspace:report.md"
    assert store.get_bytes(ref["object"]) == b"# Report\nmarker\n"
    assert ref["media_type"] == "text/markdown" and ref["byte_size"] == len(b"# Report\nmarker\n")
    finals = [e for e in art["trace"] if e["event_type"] == "final_output"]
    assert [e["content"] for e in finals] == ["Created report.md."]
    assert [e["sequence"] for e in art["trace"]] == list(range(len(art["trace"])))
    oc = art["runner_metadata"]["openclaw"]
    assert oc["workspace_snapshot"]["object"] == outcome.outputs["workspace"]
    assert oc["metadata"]["changed_paths"] == {"added": ["report.md"], "modified": [], "deleted": []}
    assert oc["metadata"]["observable_summary"]["tool_summary"] == {"calls": 1, "failures": 0, "tools": ["write"]}
    assert art["usage"]["normalized"]["input_tokens"] == 100 and art["usage"]["cost_usd"] is None
    assert art["usage"]["cost_source"] == "unknown"  # no declared price: not free, unknown
    # Every evidence reference is an object in the store, never a host path.
    for name in ("generated_openclaw_config", "raw_session_trace", "openclaw_logs", "workspace_diff"):
        assert store.has(oc[name]["object"]) and oc[name]["uri"] is None
    spec = make_spec()
    expected = config_bytes(render_config(spec.agent, spec.requested_model, {}, spec.provider_base_url, KEY_ENV))
    assert store.get_bytes(outcome.outputs["openclaw_config"]) == expected
    # Same template + same flags: the container saw the workspace and the config at /work.
    [validate, turn] = fake_docker.calls("run")
    assert validate["container_argv"] == ["openclaw", "config", "validate", "--json"]
    argv = turn["container_argv"]
    assert argv[:6] == ["openclaw", "agent", "--local", "--json", "--agent", "basic-agent"]
    assert argv[argv.index("--message") + 1].startswith("[0] user\nCreate report.md")
    assert "--pull" in turn["argv"] and turn["flags"]["pull"] == "never"
    assert "clawstore.openclaw.run=" in " ".join(turn["flags"]["labels"])
    assert fake_docker.live_containers() == []
    assert list(tmp_path.glob("claw-oc-*")) == []  # the private run directory is gone


def test_multi_turn_keeps_one_session_and_workspace(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[
        {"write": {"draft.md": "draft\n"}, "payload": payload("draft done", {"input": 10, "output": 2})},
        {"write": {"report.md": "report\n"}, "payload": payload("report done", {"input": 30, "output": 4,
                                                                              "cacheRead": 5})},
    ])
    spec = make_spec(messages=[{"role": "system", "content": "Keep context."}],
                     turns=[{"role": "user", "content": "Create draft.md."},
                            {"role": "user", "content": "Now report.md."}])
    outcome = run_openclaw(spec, store, tmp_path)
    assert outcome.status == "success"
    agents = fake_docker.calls("agent")
    sessions = {c["argv"][c["argv"].index("--session-id") + 1] for c in agents}
    assert len(agents) == 2 and len(sessions) == 1
    first = agents[0]["argv"][agents[0]["argv"].index("--message") + 1]
    second = agents[1]["argv"][agents[1]["argv"].index("--message") + 1]
    assert first.startswith("[initial_context]\n[0] system\nKeep context.") and "[user_turn] user" in first
    assert "[openclaw_hints]" in first
    assert second == "[user_turn] user\nNow report.md."
    assert "draft.md" in agents[1]["workspace_files"]  # turn 2 sees what turn 1 wrote
    assert set(tree_files(store, outcome.outputs["workspace"])) >= {"draft.md", "report.md"}
    usage = outcome.artifact["usage"]["normalized"]
    assert usage["input_tokens"] == 40 and usage["output_tokens"] == 6 and usage["cached_input_tokens"] == 5
    finals = [e["content"] for e in outcome.artifact["trace"] if e["event_type"] == "final_output"]
    assert finals == ["draft done", "report done"]
    raw = store.get_json(outcome.outputs["openclaw_raw_trace"])
    assert [t["turn_index"] for t in raw["turns"]] == [0, 1]
    assert json.loads(store.get_bytes(raw["turns"][1]["payload"]))["payloads"][0]["text"] == "report done"


def test_turn_over_the_timeout_is_timed_out_and_its_container_removed(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"sleep": 60, "payload": payload("late")}])
    began = time.monotonic()
    outcome = run_openclaw(make_spec(timeout_seconds=2), store, tmp_path)
    took = time.monotonic() - began
    assert outcome.status == "timed_out"
    assert outcome.artifact["error"]["code"] == "openclaw_timeout"
    assert outcome.artifact["error"]["metadata"] == {"turn_index": 0}
    assert took < 10
    assert fake_docker.live_containers() == []
    [removed] = fake_docker.calls("rm")
    with pytest.raises(ProcessLookupError):
        os.kill(removed["pid"], 0)
    # The workspace is still captured for a timed-out run.
    assert "AGENTS.md" in tree_files(store, outcome.outputs["workspace"])


def test_timeout_bounds_all_turns_together(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"sleep": 2.5, "payload": payload("one")},
                              {"sleep": 2.5, "payload": payload("two")}])
    spec = make_spec(timeout_seconds=4, turns=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    outcome = run_openclaw(spec, store, tmp_path)
    assert outcome.status == "timed_out"
    assert outcome.artifact["error"]["metadata"]["turn_index"] == 1
    timeouts = [c["argv"][c["argv"].index("--timeout") + 1] for c in fake_docker.calls("agent")]
    assert int(timeouts[1]) < int(timeouts[0]) <= 4  # each turn gets only what is left


def test_failing_turn_stops_the_run(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"rc": 3, "stderr": "model exploded"}, {"payload": payload("never")}])
    spec = make_spec(turns=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    outcome = run_openclaw(spec, store, tmp_path)
    err = outcome.artifact["error"]
    assert outcome.status == "failed" and err["code"] == "openclaw_execution_failed"
    assert err["metadata"]["returncode"] == 3 and err["metadata"]["turn_index"] == 0
    assert "model exploded" in err["metadata"]["stderr"]
    assert len(fake_docker.calls("agent")) == 1
    logs = store.get_bytes(outcome.outputs["openclaw_logs"]).decode()
    assert "## turn1\nreturncode: 3" in logs


def test_rejected_config_is_invalid_without_agent_runs(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(validate={"rc": 1, "stdout": '{"valid":false,"issues":[{"path":"agents.x"}]}'},
                       turns=[{"write": {"report.md": "x"}, "payload": payload("x")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "invalid"
    assert outcome.artifact["error"]["code"] == "openclaw_config_invalid"
    assert "agents.x" in outcome.artifact["error"]["message"]
    assert fake_docker.calls("agent") == [] and outcome.artifact["output_artifacts"] == []


def test_payload_on_stderr_is_read(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"payload": payload("from stderr"), "payload_on_stderr": True,
                               "stderr": "\n[agent] done\n"}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    finals = [e["content"] for e in outcome.artifact["trace"] if e["event_type"] == "final_output"]
    assert finals == ["from stderr"]


def test_missing_cli_and_missing_image_are_failed_runs(make_spec, fake_docker, store, tmp_path):
    outcome = run_openclaw(make_spec(docker_cli=str(tmp_path / "no-such-docker")), store, tmp_path)
    assert outcome.status == "failed"
    assert outcome.artifact["error"]["code"] == "openclaw_engine_unavailable"
    assert "not found" in outcome.artifact["error"]["message"]
    outcome = run_openclaw(make_spec(image="example.test/absent:1"), store, tmp_path)
    assert outcome.status == "failed" and "example.test/absent:1" in outcome.artifact["error"]["message"]
    assert fake_docker.calls("run") == []


def test_engine_refusing_to_start_is_failed(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(run_rc=125, run_stderr="docker: Error response from daemon: OCI runtime create failed\n")
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "failed"
    assert outcome.artifact["error"]["code"] == "openclaw_engine_unavailable"
    assert "OCI runtime" in outcome.artifact["error"]["message"]


def test_missing_api_key_fails_before_any_container(make_spec, fake_docker, store, tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "failed"
    assert outcome.artifact["error"]["code"] == "runner_configuration_error"
    assert KEY_ENV in outcome.artifact["error"]["message"]
    assert fake_docker.calls() == []


def test_secret_never_on_command_line_or_in_store(make_spec, fake_docker, store, tmp_path, monkeypatch):
    monkeypatch.setenv("UNRELATED_HOST_SECRET", "host-only-value")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    fake_docker.script(turns=[{"echo_env": True, "write_env_to": "leak.json",
                               "payload": payload(f"my key is {SECRET}"), "stderr": f"auth {SECRET}\n"}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "success"
    for call in fake_docker.calls("run"):
        assert SECRET not in " ".join(call["argv"])
        assert call["env_file_is_pipe"] and call["env_file_path"].startswith("/dev/fd/")  # on no disk
        assert not call["cli_env_has_key"]  # the docker CLI process itself never gets the key
        assert CONTAINER_KEY_ENV in call["env_names"] and "HTTPS_PROXY" in call["env_names"]
        assert KEY_ENV not in call["env_names"]  # the key arrives under the neutral name only
        assert "UNRELATED_HOST_SECRET" not in call["env_names"]
    blobs = all_object_bytes(store)
    assert blobs and not any(SECRET.encode() in blob for blob in blobs)
    leak = tree_files(store, outcome.outputs["workspace"])["leak.json"]
    assert b"[redacted]" in leak
    assert outcome.artifact["runner_metadata"]["openclaw"]["metadata"]["redacted_files"] == ["leak.json"]
    assert SECRET not in json.dumps(outcome.artifact)


def test_the_documented_key_variable_never_reaches_openclaw(make_spec, fake_docker, store, tmp_path,
                                                           monkeypatch):
    """OpenClaw's plugins act on OPENROUTER_API_KEY (2026.9.6 npm-installs perplexity when it is set):
    the container gets the value under a name only the rendered openclaw.json reads, even when the
    user lists the key's own name in CLAW_OPENCLAW_ENV_ALLOW."""
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("CLAW_OPENCLAW_ENV_ALLOW", "OPENROUTER_API_KEY")
    fake_docker.script(turns=[{"payload": payload("done")}])
    outcome = run_openclaw(make_spec(api_key_env="OPENROUTER_API_KEY"), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    for call in fake_docker.calls("run"):
        assert "OPENROUTER_API_KEY" not in call["env_names"] and CONTAINER_KEY_ENV in call["env_names"]
        assert "OPENCLAW_NO_AUTO_UPDATE" in call["env_names"]
    config = json.loads(store.get_bytes(outcome.outputs["openclaw_config"]))
    assert config["models"]["providers"]["openrouter"]["apiKey"] == "${" + CONTAINER_KEY_ENV + "}"
    assert "OPENROUTER_API_KEY" not in json.dumps(config) and config["plugins"] == {"enabled": False}


def test_machine_settings_come_from_the_environment(make_spec, fake_docker, store, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")
    monkeypatch.setenv("CLAW_OPENCLAW_USER", "1234:5678")
    monkeypatch.setenv("CLAW_OPENCLAW_PULL", "missing")
    monkeypatch.setenv("CLAW_OPENCLAW_ENV_ALLOW", "EXTRA_ONE")
    monkeypatch.setenv("EXTRA_ONE", "1")
    fake_docker.script(turns=[{"payload": payload("ok")}])
    run_openclaw(make_spec(), store, tmp_path)
    call = fake_docker.calls("run")[-1]
    assert call["flags"]["network"] == "host" and call["flags"]["user"] == "1234:5678"
    assert call["flags"]["pull"] == "missing" and "EXTRA_ONE" in call["env_names"]


def test_agent_output_is_pruned_and_agent_without_prompt_keys(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"write": {"node_modules/x/index.js": "x", "src/app.py": "print(1)\n"},
                               "payload": payload("ok")}])
    outcome = run_openclaw(make_spec(agent=basic_agent(agent={})), store, tmp_path)
    files = tree_files(store, outcome.outputs["workspace"])
    assert "src/app.py" in files and not any(p.startswith("node_modules") for p in files)
    assert outcome.artifact["runner_metadata"]["openclaw"]["metadata"]["pruned_paths"] == ["node_modules"]
    argv = fake_docker.calls("agent")[0]["argv"]
    assert argv[argv.index("--agent") + 1] == "basic_agent"  # no fragment id: the directory id


def test_long_prompt_goes_through_a_message_file(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"payload": payload("ok")}])
    big = "x" * 150_000
    outcome = run_openclaw(make_spec(messages=[{"role": "user", "content": big}]), store, tmp_path)
    assert outcome.status == "success"
    argv = fake_docker.calls("agent")[0]["argv"]
    assert "--message" not in argv and argv[argv.index("--message-file") + 1] == "/work/turns/turn_1.txt"


def test_turn_cut_off_by_openclaws_own_timeout_counts_as_timed_out(make_spec, fake_docker, store, tmp_path):
    # OpenClaw got `--timeout` = what was left and gave up just before our deadline, exiting non-zero.
    fake_docker.script(turns=[{"sleep": 1.5, "rc": 1, "stderr": "agent timed out"}])
    outcome = run_openclaw(make_spec(timeout_seconds=2), store, tmp_path)
    assert outcome.status == "timed_out"
    assert outcome.artifact["error"]["metadata"] == {"turn_index": 0}
    # Far from the deadline the same exit is an ordinary failure.
    fake_docker.script(turns=[{"rc": 1, "stderr": "boom"}])
    assert run_openclaw(make_spec(timeout_seconds=30), store, tmp_path).status == "failed"


def _entry(role: str, stop: str | None = None, **message: object) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": [], **message,
                                                      **({"stopReason": stop} if stop else {})}})


ANSWERED, REFUSED = _entry("assistant", "toolUse"), _entry("assistant", "error")
CUT_OFF = _entry("assistant", "aborted")
# OpenClaw's own assistant rows, written with no request to a model (its isTranscriptOnlyOpenclawAssistant).
INJECTED = _entry("assistant", "stop", provider="openclaw", model="gateway-injected",
                  content=[{"type": "text", "text": "⚠️ Agent failed before reply: LLM request failed"}])
TRANSCRIPTS = {  # a session transcript at the timeout -> was the model answering it?
    "answered": ([ANSWERED], True),
    "answered, then cut off at the timeout": ([ANSWERED, CUT_OFF], True),
    "answered, then a line cut off by rm -f": ([ANSWERED, ANSWERED[:30]], True),
    "answered, then refused": ([ANSWERED, REFUSED], False),
    "answered, refused, then cut off": ([ANSWERED, REFUSED, CUT_OFF], False),
    "refused, then answered": ([REFUSED, ANSWERED], True),
    "empty": ([], False),
    "only a cut-off line": ([ANSWERED[:30]], False),
    "a user's words only": ([_entry("user", content="assistant: stopReason toolUse")], False),
    "not an object": (['["assistant"]', '"assistant"'], False),
    "refused, then OpenClaw's own row": ([REFUSED, INJECTED], False),
}


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_a_transcript_says_whether_the_model_was_answering_at_its_end(name):
    lines, answering = TRANSCRIPTS[name]
    assert jsonl_answers("".join(line + "\n" for line in lines)).last_answered is answering


@pytest.mark.parametrize("name", ["answered, then cut off at the timeout", "answered, then refused",
                                  "refused, then OpenClaw's own row"])
def test_a_timeout_is_the_agents_outcome_only_while_its_model_was_answering(make_spec, fake_docker, store, tmp_path,
                                                                            name):
    """Turn 1 leaves OpenClaw's session transcript, turn 2 outlives the run's timeout: the transcript alone decides
    between the agent's outcome (kept) and a fault (retried)."""
    lines, answering = TRANSCRIPTS[name]
    transcript = "".join(line + "\n" for line in lines)
    fake_docker.script(turns=[{"file": {"state/agents/main/sessions/s.jsonl": transcript}, "payload": payload("one")},
                              {"sleep": 60}])
    spec = make_spec(timeout_seconds=4, turns=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    outcome = run_openclaw(spec, store, tmp_path)
    assert outcome.status == "timed_out", outcome.artifact["error"]
    code = "openclaw_agent_timeout" if answering else "openclaw_timeout"
    assert outcome.artifact["error"]["code"] == code, outcome.artifact["error"]
    assert outcome.artifact["error"]["metadata"]["turn_index"] == 1


def test_a_workspace_file_named_in_bytes_that_are_not_utf8_is_kept_with_its_name_escaped(
        make_spec, fake_docker, store, tmp_path):
    # (a paid run used to fail when its workspace was stored: "name '\udce9' is not valid UTF-8")
    fake_docker.script(turns=[{"write": {"caf\udce9.txt": "latin-1 name\n"}, "payload": payload("Wrote it.")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.artifact["status"] == "success", outcome.artifact["error"]
    assert tree_files(store, outcome.outputs["workspace"])["caf\\xe9.txt"] == b"latin-1 name\n"
    assert "+++ workspace/caf\\xe9.txt" in store.get_bytes(outcome.outputs["workspace_diff"]).decode()


def test_the_environment_reaches_the_cli_through_a_pipe_written_whole(tmp_path):
    """env_pipe: what the CLI reads at /dev/fd/N is the env-file, byte for byte, also past a pipe's
    default 64 KiB; one too large for any pipe is refused at once instead of blocking the run."""
    import subprocess

    from clawstore.runners.openclaw.container import EnvTooLarge, env_pipe

    env = {"B": "two", "A": "x" * (200 << 10)}
    fd = env_pipe(env)
    try:
        read = subprocess.run(["cat", f"/dev/fd/{fd}"], pass_fds=(fd,), capture_output=True, timeout=30)
    finally:
        os.close(fd)
    assert read.stdout == f"A={env['A']}\nB=two\n".encode()
    began = time.monotonic()
    with pytest.raises(EnvTooLarge, match="does not fit in a pipe"):
        env_pipe({"HUGE": "x" * (4 << 20)})
    assert time.monotonic() - began < 5


def test_declared_prices_price_the_turns_and_say_so(make_spec, fake_docker, store, tmp_path):
    # OpenClaw reports no provider cost: its cost is the turns' tokens at the declared prices (cache reads
    # are counted apart from input by OpenClaw, so priced at their own price).
    fake_docker.script(turns=[{"payload": payload("done", {"input": 30, "output": 4, "cacheRead": 5})}])
    prices = {"input": 3.0, "output": 15.0, "cacheRead": 0.3}
    outcome = run_openclaw(make_spec(model_extras={"pricing": prices}), store, tmp_path)
    usage = outcome.artifact["usage"]
    assert usage["cost_source"] == "priced"
    assert usage["cost_usd"] == pytest.approx((30 * 3.0 + 4 * 15.0 + 5 * 0.3) / 1e6)



@pytest.mark.parametrize("half", [None, {"input": 30, "total": 30}], ids=["no_usage", "no_output_count"])
def test_a_turn_whose_usage_counts_no_tokens_leaves_the_runs_tokens_and_cost_unknown(make_spec, fake_docker, store,
                                                                                     tmp_path, half):
    # before: the turn counted 0 tokens, priced at the declared prices as if it were free
    silent = payload("report done")
    if half is None:
        del silent["meta"]["agentMeta"]["usage"]
    else:
        silent["meta"]["agentMeta"]["usage"] = half
    fake_docker.script(turns=[{"payload": payload("draft done", {"input": 10, "output": 2})}, {"payload": silent}])
    spec = make_spec(turns=[{"role": "user", "content": "Create draft.md."}, {"role": "user", "content": "Go on."}],
                     model_extras={"pricing": {"input": 3.0, "output": 15.0}})
    usage = run_openclaw(spec, store, tmp_path).artifact["usage"]
    assert (usage["cost_usd"], usage["cost_source"]) == (None, "unknown"), usage
    assert usage["usage_rejected"].startswith("usage: an OpenClaw turn reports no input and output"), usage


@pytest.mark.parametrize(("counts", "prices"), [
    ({"input": 0, "output": 0, "total": 0}, {"input": 3.0, "output": 15.0}),  # said 0 tokens: known, not unknown
    ({"input": 100, "output": 10, "total": 110}, {"input": 0, "output": 0}),  # a free local model, said so
], ids=["0_tokens", "free_model"])
def test_a_turn_that_counts_0_tokens_or_a_free_model_costs_0(make_spec, fake_docker, store, tmp_path, counts, prices):
    fake_docker.script(turns=[{"payload": payload("done", counts)}])
    usage = run_openclaw(make_spec(model_extras={"pricing": prices}), store, tmp_path).artifact["usage"]
    assert (usage["normalized"]["input_tokens"], usage["cost_usd"], usage["cost_source"]) == (
        counts["input"], 0.0, "priced")
    assert "usage_rejected" not in usage, usage


def test_a_models_prices_are_in_no_run_key_and_a_run_keyed_with_them_is_found(make_spec, fake_docker, store,
                                                                             tmp_path):
    # openclaw.json carries the prices (OpenClaw's own cost figure): before, its id was in the run key, so editing a
    # suite model's `pricing` or `cost` ran every OpenClaw run again. The identity before is kept as the legacy one.
    from clawstore.runners.openclaw import openclaw_identity, openclaw_legacy_identity

    free = make_spec()
    priced = [make_spec(model_extras={name: {"input": 3.0, "output": 15.0}}) for name in ("pricing", "cost")]
    dearer = make_spec(model_extras={"pricing": {"input": 6.0, "output": 30.0}, "primary_params": {}})
    assert openclaw_identity(free) == openclaw_identity(priced[0]) == openclaw_identity(priced[1]) == \
        openclaw_identity(dearer)
    assert openclaw_legacy_identity(free) is None  # (no price: the key it always had)
    legacy = openclaw_legacy_identity(priced[0])
    assert legacy is not None and legacy["openclaw_json"] == openclaw_identity(priced[0], priced=True)["openclaw_json"]
    assert legacy["openclaw_json"] == oid_of(config_bytes(render_config(
        priced[0].agent, priced[0].requested_model, priced[0].model_extras, priced[0].provider_base_url,
        priced[0].api_key_env)))  # what the runner writes, as the key covered it before
    assert legacy != openclaw_legacy_identity(dearer)


@pytest.mark.parametrize("turn", [
    {"sleep": 60, "payload": payload("late", {"input": 50, "output": 5})},  # timed out: its container removed
    {"rc": 3, "stderr": "model exploded"},  # crashed without a result
    {"flood": "stdout"},  # stopped past the output limit
], ids=["timed_out", "crashed", "flooded"])
def test_a_turn_that_ran_and_left_no_result_leaves_the_runs_tokens_and_cost_unknown(make_spec, fake_docker, store,
                                                                                    tmp_path, turn):
    # before: the turn counted 0 tokens, so the run was `priced` at the first turn's tokens alone
    fake_docker.script(turns=[{"payload": payload("draft done", {"input": 10, "output": 2})}, turn])
    spec = make_spec(turns=[{"role": "user", "content": "Create draft.md."}, {"role": "user", "content": "Go on."}],
                     model_extras={"pricing": {"input": 3.0, "output": 15.0}}, timeout_seconds=4)
    outcome = run_openclaw(spec, store, tmp_path)
    usage = outcome.artifact["usage"]
    assert outcome.status != "success" and (usage["cost_usd"], usage["cost_source"]) == (None, "unknown"), usage
    assert usage["usage_rejected"].startswith("usage: an OpenClaw turn ended without a result"), usage


def test_a_turn_the_engine_would_not_start_sent_nothing_and_costs_0(make_spec, fake_docker, store, tmp_path):
    # the engine refused the turn's container (exit 125): no request left, known 0 even without a price (before:
    # a turn was invoked, so its cost was unknown); one the engine made that exited 125 itself is no refusal
    # (tests/openclaw/test_hostile_agent.py)
    fake_docker.script(turns=[{"engine_refuses": True}])
    usage = run_openclaw(make_spec(), store, tmp_path).artifact["usage"]
    assert (usage["cost_usd"], usage["normalized"]["input_tokens"]) == (0.0, 0) and "usage_rejected" not in usage


def test_a_free_models_run_whose_turn_left_no_result_is_recorded_at_0(make_spec, fake_docker, store, tmp_path):
    # its tokens unknown × prices all 0: the record's cost is a known 0 (run_exec's metrics), not unknown
    from clawstore.builder.run_exec import _metrics

    fake_docker.script(turns=[{"rc": 3, "stderr": "model exploded"}])
    free = {"pricing": {"input": 0, "output": 0}}
    usage = run_openclaw(make_spec(model_extras=free), store, tmp_path).artifact["usage"]
    assert usage["cost_source"] == "unknown", usage
    assert (_metrics(usage, 1.0, free)["cost_usd"], _metrics(usage, 1.0, free)["cost_source"]) == (0.0, "priced")
    assert _metrics(usage, 1.0, {"pricing": {"input": 1, "output": 0}})["cost_usd"] is None


def test_a_template_symlink_pointing_out_of_the_workspace_reaches_the_agent_as_a_link(
        make_spec, fake_docker, store, agent_dir, tmp_path):
    """A link the agent's template holds to a path of the image (`/etc/hostname`, or `../..` above it) means that
    path in the container; before session 60 the checkout refused it and every run of the agent failed
    `runner_execution_failed: UnsafeTreeError`, though `claw validate` and the plan accepted the agent."""
    (agent_dir / "workspace" / "image_file").symlink_to("/etc/hostname")
    (agent_dir / "workspace" / "up").symlink_to("../../etc/passwd")
    (agent_dir / "workspace" / "etc").symlink_to("/etc")  # on the host, the host's /etc: never walked
    fake_docker.script(turns=[{"write": {"report.md": "r\n"}, "payload": payload("done")}])
    outcome = run_openclaw(make_spec(agent_tree=agent_workspace_tree(store, agent_dir)), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    links = {e.path: e.target for e in store.read_tree(outcome.outputs["workspace"]) if e.type == "symlink"}
    assert links == {"image_file": "/etc/hostname", "up": "../../etc/passwd", "etc": "/etc"}
    assert not any(e.path.startswith("etc/") for e in store.read_tree(outcome.outputs["workspace"]))
    assert "image_file" not in store.get_bytes(outcome.outputs["workspace_diff"]).decode()  # unchanged: no diff


def test_a_template_directory_claw_prunes_is_not_reported_deleted_by_the_agent(
        make_spec, fake_docker, store, agent_dir, tmp_path):
    """The template's `.git` is pruned from the final workspace before it is stored (not kept, not deleted by the
    agent): before session 60 the diff showed `--- template/.git/HEAD +++ /dev/null` and changed_paths listed it
    deleted in every run of such an agent."""
    (agent_dir / "workspace" / ".git").mkdir()
    (agent_dir / "workspace" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    fake_docker.script(turns=[{"write": {"report.md": "r\n"}, "payload": payload("done")}])
    outcome = run_openclaw(make_spec(agent_tree=agent_workspace_tree(store, agent_dir)), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    meta = outcome.artifact["runner_metadata"]["openclaw"]["metadata"]
    assert meta["pruned_paths"] == [".git"]
    assert meta["changed_paths"] == {"added": ["report.md"], "modified": [], "deleted": []}
    diff = store.get_bytes(outcome.outputs["workspace_diff"]).decode()
    assert ".git" not in diff and "+++ workspace/report.md" in diff


def test_a_template_link_claw_prunes_is_not_reported_deleted_by_the_agent(
        make_spec, fake_docker, store, agent_dir, tmp_path):
    """A template's `node_modules` may be a link to the image's (`/usr/lib/node_modules`, kept as a link since
    session 60): pruned like a directory, it was listed deleted by the agent in every run."""
    (agent_dir / "workspace" / "node_modules").symlink_to("/usr/lib/node_modules")
    fake_docker.script(turns=[{"write": {"report.md": "r\n"}, "payload": payload("done")}])
    outcome = run_openclaw(make_spec(agent_tree=agent_workspace_tree(store, agent_dir)), store, tmp_path)
    meta = outcome.artifact["runner_metadata"]["openclaw"]["metadata"]
    assert meta["pruned_paths"] == ["node_modules"]
    assert meta["changed_paths"] == {"added": ["report.md"], "modified": [], "deleted": []}
    assert "node_modules" not in store.get_bytes(outcome.outputs["workspace_diff"]).decode()


def test_a_turn_openclaw_refused_says_openclaws_reason(make_spec, fake_docker, store, tmp_path):
    """2026.9.6 refuses a workspace `openclaw onboard` 2026.4.x wrote (`.openclaw/workspace-state.json`) with its
    reason in its JSON result and on stderr: before session 60 the build, claw query and claw view said only
    `turn 1 of 1: openclaw exited 1`."""
    reason = "Legacy workspace setup state requires migration for /work/workspace; run openclaw doctor --fix."
    fake_docker.script(turns=[{"rc": 1, "payload": {"ok": False, "error": {"type": "cli_error", "message": reason}},
                               "stderr": f"[openclaw] The CLI command failed.\n[openclaw] Reason: {reason}\n"
                                         "[openclaw] Try: openclaw doctor\n"}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.artifact["error"]["message"] == f"turn 1 of 1: openclaw exited 1: {reason}"
    fake_docker.script(turns=[{"rc": 3, "stderr": "boom\nmodel exploded\n\n"}])
    assert run_openclaw(make_spec(), store, tmp_path).artifact["error"]["message"] == (
        "turn 1 of 1: openclaw exited 3: model exploded")  # no result: stderr's last line


def test_an_engine_refusal_says_the_engines_reason_not_its_help_hint(make_spec, fake_docker, store, tmp_path):
    """What docker 28 prints when it will not start a container (here CLAW_OPENCLAW_CPUS=64 on 2 cores): before
    session 60 the run's error was its last line, `validate: Run 'docker run --help' for more information`."""
    fake_docker.script(run_rc=125, run_stderr="docker: Error response from daemon: Range of CPUs is from 0.01 to 2.00, "
                                              "as there are only 2 CPUs available\n\nRun 'docker run --help' for more "
                                              "information\n")
    error = run_openclaw(make_spec(), store, tmp_path).artifact["error"]
    assert error["code"] == "openclaw_engine_unavailable"
    assert error["message"] == ("validate: docker: Error response from daemon: Range of CPUs is from 0.01 to 2.00, "
                                "as there are only 2 CPUs available")


def test_a_workspace_the_agent_deleted_is_recorded_empty_and_its_diff_deletes_every_template_file(
        make_spec, fake_docker, store, tmp_path):
    """An agent that removes `workspace/` leaves nothing: before session 61 claw recorded the template's tree as the
    final workspace, so the diff (`claw view`) and changed_paths said the run changed nothing."""
    fake_docker.script(turns=[{"remove": ["workspace"], "payload": payload("done")}])
    spec = make_spec()
    outcome = run_openclaw(spec, store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    template = sorted(tree_files(store, spec.agent_tree))
    assert template and outcome.outputs["workspace"] != spec.agent_tree
    assert list(store.read_tree(outcome.outputs["workspace"])) == []
    meta = outcome.artifact["runner_metadata"]["openclaw"]["metadata"]
    assert meta["workspace_missing"] is True
    assert meta["changed_paths"] == {"added": [], "modified": [], "deleted": template}
    diff = store.get_bytes(outcome.outputs["workspace_diff"]).decode()
    assert all(f"--- template/{path}" in diff for path in template) and "+++ /dev/null" in diff


def test_a_proxy_password_passed_to_the_agent_is_never_stored(make_spec, fake_docker, store, tmp_path, monkeypatch):
    """The proxy variables reach the container as they are, and a proxy URL's user:password is a credential: an agent
    that prints its environment (or OpenClaw naming the proxy it failed to reach) must not put it in the store.
    So must a variable the user allowed (CLAW_OPENCLAW_ENV_ALLOW) whose value is a URL carrying a credential."""
    proxy_password, db_password = "Pr0xyPassw0rd-4417", "DbPassw0rd-8832"
    monkeypatch.setenv("HTTPS_PROXY", f"http://alice:{proxy_password}@proxy.invalid:3128")
    monkeypatch.setenv("DATABASE_URL", f"postgres://app:{db_password}@db.invalid/app")
    monkeypatch.setenv("CLAW_OPENCLAW_ENV_ALLOW", "DATABASE_URL")
    fake_docker.script(turns=[{"echo_env": True, "write_env_to": "leak.json", "payload": payload("done"),
                               "stderr": f"proxy http://alice:{proxy_password}@proxy.invalid:3128 refused\n"}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    for call in fake_docker.calls("run"):
        assert "HTTPS_PROXY" in call["env_names"] and "DATABASE_URL" in call["env_names"]  # passed, as documented
    blobs = all_object_bytes(store)
    for password in (proxy_password, db_password):
        assert blobs and not any(password.encode() in blob for blob in blobs), password
        assert password not in json.dumps(outcome.artifact)
    assert "leak.json" in outcome.artifact["runner_metadata"]["openclaw"]["metadata"]["redacted_files"]


@pytest.mark.parametrize(("name", "token"), [("GH_PAT", "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
                                             ("SLACK_BOT", "xoxb-2048-7319-Qm4kZp8TbL2s"),
                                             ("DEPLOY_WITH", "sk-proj-Zp4TbL2sQm4k8Rw1Yx7c")])
def test_an_allowed_variable_holding_a_known_key_shape_is_never_stored(make_spec, fake_docker, store, tmp_path,
                                                                       monkeypatch, name, token):
    """A variable the user allowed (CLAW_OPENCLAW_ENV_ALLOW) under a name that says nothing of a secret (`GH_PAT`, a
    GitHub token the agent pushes with) whose value has a key's shape (values/key_shapes.py): only the provider key,
    names like a secret's and URL credentials were redacted, and an agent that printed its environment stored it
    (before session 73)."""
    monkeypatch.setenv(name, token)
    monkeypatch.setenv("CLAW_OPENCLAW_ENV_ALLOW", name)
    fake_docker.script(turns=[{"echo_env": True, "write_env_to": "leak.json", "payload": payload("done")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    assert all(name in call["env_names"] for call in fake_docker.calls("run"))  # passed, as allowed
    blobs = all_object_bytes(store)
    assert blobs and not any(token.encode() in blob for blob in blobs)
    assert token not in json.dumps(outcome.artifact)


def test_an_ssh_engines_login_name_is_no_secret(make_spec, fake_docker, store, tmp_path, monkeypatch):
    """`DOCKER_HOST=ssh://deploy@host`: a login's name (ssh takes no password in the URL, docker refuses one). The
    engine's address is redacted for its credential, and kept masked in the build's container record: its user alone
    is neither, or every `deploy` the agent wrote would be `[redacted]` (the record keeps it whole: orphans.py)."""
    monkeypatch.setenv("DOCKER_HOST", "ssh://deploy@127.0.0.1:2222")
    fake_docker.script(turns=[{"write": {"notes.md": "deploy to staging\n"}, "payload": payload("deploy done")}])
    outcome = run_openclaw(make_spec(), store, tmp_path, build_id="20261207T000000-00c0ffee")
    assert outcome.status == "success", outcome.artifact["error"]
    assert "deploy done" in json.dumps(outcome.artifact) and "[redacted]" not in json.dumps(outcome.artifact)
    [record] = (store.root / "containers").glob("*.json")
    assert json.loads(record.read_text())["engine"] == {"DOCKER_HOST": "ssh://deploy@127.0.0.1:2222"}


@pytest.mark.parametrize("step", ["validate", "turn"])
def test_a_secret_across_the_kept_tail_of_a_failed_steps_output_leaves_no_part_of_it(
        make_spec, fake_docker, store, tmp_path, step):
    """A failed validation's output and a failed turn's stderr are kept by their last 2000 characters: the secrets
    were redacted from that tail only, so one the cut crossed was no longer whole there and its end was stored (in
    the run's error and its metadata)."""
    tail = SECRET[len(SECRET) // 2:]
    said = f"auth {SECRET}\n" + "y" * (2000 - len(tail) - 1)  # the last 2000 characters begin inside the secret
    if step == "validate":
        fake_docker.script(validate={"rc": 1, "stdout": said})
    else:
        fake_docker.script(turns=[{"rc": 1, "stderr": said}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status in ("failed", "invalid"), outcome.status
    assert tail not in json.dumps(outcome.artifact)
    assert not any(tail.encode() in blob for blob in all_object_bytes(store))


def test_a_key_pasted_with_spaces_around_it_is_redacted_as_the_agent_uses_it(make_spec, fake_docker, store, tmp_path,
                                                                            monkeypatch):
    """A key exported with a space or tab around it (a copy and paste): claw's own requests send it stripped, and so
    does any agent that reads it; the runner looked for it with its spaces, so the key an agent wrote was stored."""
    monkeypatch.setenv(KEY_ENV, f" {SECRET}\t")
    fake_docker.script(turns=[{"write": {"notes.md": f"key={SECRET}\n"}, "payload": payload(f"my key is {SECRET}")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    assert not any(SECRET.encode() in blob for blob in all_object_bytes(store))
    assert SECRET not in json.dumps(outcome.artifact)
