"""The pure parts of the openclaw runner: workspace trees, openclaw.json, prompts, identity, digests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clawstore.config.models import Agent
from clawstore.runners.openclaw import agent_workspace_tree, openclaw_identity, resolve_image_digest
from clawstore.runners.openclaw.config import config_bytes, render_config
from clawstore.runners.openclaw.evidence import tool_calls
from clawstore.runners.openclaw.prompt import render_turns
from clawstore.runners.openclaw.runner import placeholders_in_tree
from clawstore.runners.openclaw.workspace import STANDARD_FILES, placeholder_text, workspace_diff
from clawstore.store import Store
from tests.openclaw.conftest import FAKE_ID, FAKE_IMAGE, basic_agent, payload

# The compat corpus's basic_agent/agent.yaml, as users write it.
BASIC_AGENT_YAML = """
schema_version: 1
agent_id: basic_agent
title: Basic Agent
tags: [basic, openclaw]
openclaw:
  identity: {name: Basic Agent}
  agents_defaults: {sandbox: workspace-write}
  agent: {id: basic-agent, prompt: Follow the workspace files.}
  model_defaults:
    aliases: {default: benchmark-primary}
"""


# --- workspace ----------------------------------------------------------------------------------
def test_template_tree_adds_placeholders_and_is_deterministic(store: Store, agent_dir: Path):
    (agent_dir / "workspace" / ".openclaw").mkdir()
    (agent_dir / "workspace" / ".openclaw" / "state.json").write_text("{}")
    tree = agent_workspace_tree(store, agent_dir)
    files = {e.path: e for e in store.read_tree(tree) if e.type == "file"}
    assert set(files) == {*STANDARD_FILES, ".openclaw/state.json"}
    assert store.get_bytes(files["USER.md"].object).decode() == placeholder_text("USER.md")
    assert store.get_bytes(files["AGENTS.md"].object) == b"# Agents\nBe concise.\n"
    assert placeholders_in_tree(store, tree) == ["IDENTITY.md", "TOOLS.md", "USER.md"]
    assert agent_workspace_tree(store, agent_dir) == tree
    (agent_dir / "workspace" / "SOUL.md").write_text("# Soul\nchanged\n")
    assert agent_workspace_tree(store, agent_dir) != tree
    assert list((agent_dir / "workspace").iterdir())  # the template itself is untouched
    assert not (agent_dir / "workspace" / "USER.md").exists()


def test_a_named_pipe_in_the_template_is_left_out_as_every_stored_tree_leaves_it(store: Store, agent_dir: Path):
    """A suite's agent template holding a named pipe (nothing to copy or hash) failed the plan with
    shutil's list of errors; a stored tree never holds one, so the template's copy leaves it out too."""
    os.mkfifo(agent_dir / "workspace" / "pipe")
    (agent_dir / "workspace" / "notes").mkdir()
    os.mkfifo(agent_dir / "workspace" / "notes" / "pipe")
    tree = agent_workspace_tree(store, agent_dir)
    paths = {e.path for e in store.read_tree(tree)}
    assert "pipe" not in paths and "notes/pipe" not in paths and "AGENTS.md" in paths


def test_agent_prompt_is_appended_to_agents_md(store: Store, agent_dir: Path, tmp_path: Path):
    agent = basic_agent(agent={"id": "basic-agent", "prompt": "  Keep replies short.\n"})
    tree = agent_workspace_tree(store, agent_dir, agent)
    files = {e.path: store.get_bytes(e.object) for e in store.read_tree(tree) if e.type == "file"}
    assert files["AGENTS.md"] == b"# Agents\nBe concise.\n\n## Agent prompt\n\nKeep replies short.\n"
    assert (agent_dir / "workspace" / "AGENTS.md").read_text() == "# Agents\nBe concise.\n"  # template untouched
    assert agent_workspace_tree(store, agent_dir, basic_agent()) == agent_workspace_tree(store, agent_dir)
    # A linked AGENTS.md is replaced by what it showed, never written through.
    outside = tmp_path / "outside.md"
    outside.write_text("# Elsewhere\n")
    (agent_dir / "workspace" / "AGENTS.md").unlink()
    (agent_dir / "workspace" / "AGENTS.md").symlink_to(outside)
    linked = agent_workspace_tree(store, agent_dir, agent)
    [entry] = [e for e in store.read_tree(linked) if e.path == "AGENTS.md"]
    assert entry.type == "file" and outside.read_text() == "# Elsewhere\n"
    assert store.get_bytes(entry.object).decode().endswith("## Agent prompt\n\nKeep replies short.\n")


def test_placeholder_wording_is_our_own():
    text = placeholder_text("TOOLS.md")
    assert text.startswith("# TOOLS\n") and "clawstore" in text
    assert "Benchmark-generated placeholder" not in text


def test_missing_workspace_dir_is_a_config_error(store: Store, tmp_path: Path):
    from clawstore.errors import ConfigError

    (tmp_path / "agents" / "x").mkdir(parents=True)
    with pytest.raises(ConfigError, match="workspace"):
        agent_workspace_tree(store, tmp_path / "agents" / "x")


def test_diff_reports_added_modified_deleted_and_binary(store: Store, tmp_path: Path):
    base, final = tmp_path / "base", tmp_path / "final"
    for d in (base, final):
        d.mkdir()
    (base / "keep.md").write_text("same\n")
    (final / "keep.md").write_text("same\n")
    (base / "edit.md").write_text("one\ntwo\n")
    (final / "edit.md").write_text("one\nthree\n")
    (base / "gone.md").write_text("bye\n")
    (final / "new.bin").write_bytes(b"\x00\x01")
    diff = workspace_diff(store, store.put_tree(base), store.put_tree(final))
    assert "--- template/edit.md\n+++ workspace/edit.md" in diff and "-two\n+three" in diff
    assert "--- template/gone.md\n+++ /dev/null" in diff
    assert "Binary files /dev/null and workspace/new.bin differ" in diff
    assert "keep.md" not in diff and diff.endswith("\n")
    assert workspace_diff(store, store.put_tree(base), store.put_tree(base)) == ""


# --- openclaw.json ------------------------------------------------------------------------------
def test_config_has_the_reference_shape():
    agent = basic_agent(agents_defaults={"sandbox": "workspace-write", "bootstrapMaxChars": 9007199254740991},
                        agent={"id": "basic-agent", "prompt": "Be brief."},
                        model_defaults={"aliases": {"default": "bench"}, "primary_params": {"max_tokens": 8192}})
    doc = render_config(agent, "minimax/minimax-m2.7", {"primary_params": {"reasoning": {"effort": "low"}}},
                        "http://127.0.0.1:8000/v1/", "MY_KEY")
    defaults, [listed] = doc["agents"]["defaults"], doc["agents"]["list"]
    assert defaults["sandbox"] == {"mode": "off"} and defaults["bootstrapMaxChars"] == 9007199254740991
    assert defaults["workspace"] == "/work/workspace"
    assert defaults["model"] == {"primary": "openrouter/minimax/minimax-m2.7"}
    assert defaults["models"] == {"openrouter/minimax/minimax-m2.7": {
        "alias": "bench", "params": {"max_tokens": 8192, "reasoning": {"effort": "low"}}}}
    # OpenClaw >= 2026.6 rejects systemPromptOverride: the prompt goes into AGENTS.md instead.
    assert listed == {"id": "basic-agent", "model": "openrouter/minimax/minimax-m2.7"}
    provider = doc["models"]["providers"]["openrouter"]
    # Whatever the host's key variable, the file names only the neutral one the container gets.
    assert provider["baseUrl"] == "http://127.0.0.1:8000/v1"
    assert provider["apiKey"] == "${CLAWSTORE_PROVIDER_API_KEY}" and "MY_KEY" not in json.dumps(doc)
    assert doc["plugins"] == {"enabled": False}
    [model] = provider["models"]
    assert model["id"] == "minimax/minimax-m2.7" and model["maxTokens"] == 8192 and model["reasoning"] is True
    assert "identity" not in json.dumps(doc)


def test_config_bytes_are_deterministic_and_prices_flow_in():
    agent = basic_agent()
    one = config_bytes(render_config(agent, "openrouter/a/b", {}, "https://openrouter.ai/api/v1", "K"))
    two = config_bytes(render_config(dict(reversed(list(agent.items()))), "a/b", {},
                                     "https://openrouter.ai/api/v1", "K"))
    assert one == two and one.endswith(b"}\n") and b'\n  "agents"' in one
    priced = render_config(agent, "a/b", {"pricing": {"input": 3, "output": 15}}, "https://x/v1", "K")
    cost = priced["models"]["providers"]["openrouter"]["models"][0]["cost"]
    assert cost == {"input": 3.0, "output": 15.0, "cacheRead": 0.0, "cacheWrite": 0.0}
    assert render_config(agent, "a/b", {}, "https://x/v1", None)["models"]["providers"]["openrouter"][
        "apiKey"] == "no-key"


def test_config_accepts_the_loaded_agent_model():
    import yaml

    model = Agent.model_validate(yaml.safe_load(BASIC_AGENT_YAML))
    as_model = render_config(model, "a/b", {}, "https://x/v1", "K")
    as_dict = render_config(model.model_dump(mode="json"), "a/b", {}, "https://x/v1", "K")
    assert as_model == as_dict and as_model["agents"]["list"][0]["id"] == "basic-agent"


# --- prompts ------------------------------------------------------------------------------------
def test_single_turn_prompt_has_messages_attachments_and_hints():
    [text] = render_turns([{"role": "system", "content": "S"}, {"role": "user", "content": "U", "name": "bob"}],
                          [], [("data.csv", b"a,b\n1,2\n")], {"expected_artifact": "report.md"})
    assert text == ("[0] system\nS\n\n[1] user (bob)\nU\n\n[attachment] data.csv\na,b\n1,2\n\n\n"
                    '[openclaw_hints]\n{\n  "expected_artifact": "report.md"\n}')


def test_multi_turn_prompt_puts_context_in_the_first_turn_only():
    texts = render_turns([{"role": "system", "content": "Keep context."}],
                         [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
                         [("a.txt", b"A")], {})
    assert texts[0] == "[initial_context]\n[0] system\nKeep context.\n\n[user_turn] user\none\n\n[attachment] a.txt\nA"
    assert texts[1] == "[user_turn] user\ntwo"
    assert render_turns([], [{"role": "user", "content": "x"}], [], {}) == ["[user_turn] user\nx"]


# --- identity -----------------------------------------------------------------------------------
def test_identity_covers_what_changes_a_run_and_not_the_timeout(make_spec):
    base = openclaw_identity(make_spec())
    assert base == openclaw_identity(make_spec(timeout_seconds=999))
    assert base["image_digest"] == FAKE_ID and base["model_ref"] == "openrouter/test/model"
    assert base["openclaw_json"].startswith("blake3:")
    for change in ({"image_digest": "sha256:" + "cd" * 32}, {"image": "other:1"}, {"agent_tree": "blake3:" + "0" * 64},
                   {"docker_cli": "podman"}, {"model_extras": {"primary_params": {"max_tokens": 5}}},
                   {"requested_model": "other/model"}, {"agent": basic_agent(agent={"id": "x"})},
                   {"provider_base_url": "http://127.0.0.1:1/v1"}):
        assert openclaw_identity(make_spec(**change)) != base, change
    assert "timeout" not in json.dumps(base)
    # of the container CLI, its engine's name: not where it is installed (before session 77 the path as written)
    named = openclaw_identity(make_spec(docker_cli="docker"))
    assert named == openclaw_identity(make_spec(docker_cli="/x/../x/docker")) == openclaw_identity(
        make_spec(docker_cli="/usr/bin/docker")) and named["docker_cli"] == "docker"


# --- image digest -------------------------------------------------------------------------------
def test_digest_prefers_the_registry_digest_then_the_image_id(fake_docker):
    manifest = "sha256:" + "ef" * 32
    fake_docker.script(images={FAKE_IMAGE: {"Id": FAKE_ID},
                               "reg.test/oc:1": {"Id": FAKE_ID, "RepoDigests": [f"reg.test/oc@{manifest}"]}})
    assert resolve_image_digest(FAKE_IMAGE, fake_docker.cli) == FAKE_ID
    assert resolve_image_digest("reg.test/oc:1", fake_docker.cli) == manifest
    assert resolve_image_digest("absent:1", fake_docker.cli) is None
    assert resolve_image_digest(FAKE_IMAGE, "/nonexistent/docker") is None


def test_a_runs_tool_calls_are_its_turns_reported_counts_or_unknown() -> None:
    """Σ `meta.toolSummary.calls` over the turns (claw query's runs.tool_calls); a turn that left no result or reported
    no plain count makes the whole unknown, never a partial sum."""
    two, one = payload("a", tools=["write", "read"]), payload("b", tools=["exec"])
    assert tool_calls([two, one]) == 3
    assert tool_calls([payload("c")]) == 0  # a turn that used no tool
    assert tool_calls([two, None]) is None  # a started turn without a result
    odd = payload("d")
    odd["meta"]["toolSummary"]["calls"] = "3"
    assert tool_calls([two, odd]) is None and tool_calls([]) is None
