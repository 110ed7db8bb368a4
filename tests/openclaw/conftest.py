from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clawstore.runners.openclaw import OpenClawSpec, agent_workspace_tree
from clawstore.store import Store
from tests.openclaw.engine import DockerEngine, in_ci, start_engine

FAKE_IMAGE = "example.test/openclaw:fake"
FAKE_ID = "sha256:" + "ab" * 32
SECRET = "sk-test-secret-value-0123456789"
KEY_ENV = "CLAW_TEST_OPENCLAW_KEY"


def basic_agent(agent_id: str = "basic_agent", **openclaw: Any) -> dict[str, Any]:
    block = {"identity": {"name": "Basic"}, "agents_defaults": {"sandbox": "workspace-write"},
             "agent": {"id": "basic-agent"}, "model_defaults": {"aliases": {"default": "bench"}}}
    block.update(openclaw)
    return {"schema_version": 1, "agent_id": agent_id, "title": "Basic Agent", "openclaw": block}


def payload(text: str, usage: dict[str, int] | None = None, tools: list[str] | None = None) -> dict[str, Any]:
    """A result in the shape `openclaw agent --json` prints."""
    return {"payloads": [{"text": text, "mediaUrl": None}],
            "meta": {"agentMeta": {"provider": "openrouter", "model": "test/model",
                                   "usage": usage or {"input": 100, "output": 10, "total": 110}},
                     "finalPromptText": "prompt", "finalAssistantVisibleText": text, "stopReason": "stop",
                     "toolSummary": {"calls": len(tools or []), "failures": 0, "tools": tools or []}}}


@dataclass
class FakeDocker:
    cli: str
    state: Path
    scenario_path: Path

    def script(self, **scenario: Any) -> None:
        scenario.setdefault("images", {FAKE_IMAGE: {"Id": FAKE_ID}})
        self.scenario_path.write_text(json.dumps(scenario))

    def calls(self, cmd: str | None = None) -> list[dict[str, Any]]:
        path = self.state / "calls.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [r for r in rows if cmd is None or r["cmd"] == cmd]

    def live_containers(self) -> list[str]:
        return sorted(p.stem for p in (self.state / "containers").glob("*.json"))

    def end_containers(self) -> None:
        """SIGKILL every fake container still running (a scenario's `sleep` keeps one up to minutes): what a test that
        failed before its build or gc stopped them left."""
        for path in (self.state / "containers").glob("*.json"):
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError, ProcessLookupError):
                os.kill(int(json.loads(path.read_text())["pid"]), signal.SIGKILL)


def fake_cli(bindir: Path) -> Path:
    """`bindir`/fake-docker: runs fake_docker.py. Without `site` (-S: the fake needs only the standard library, and
    site's start-up was 40 % of each call's CPU; the one third-party import it makes adds site-packages itself)."""
    bindir.mkdir(parents=True, exist_ok=True)
    cli = bindir / "fake-docker"
    cli.write_text(f"#!/bin/sh\nexec {sys.executable} -S {Path(__file__).with_name('fake_docker.py')} \"$@\"\n")
    cli.chmod(0o755)
    return cli


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDocker:
    cli = fake_cli(tmp_path / "bin")
    state = tmp_path / "fake-state"
    fake = FakeDocker(str(cli), state, tmp_path / "scenario.json")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))
    monkeypatch.setenv("FAKE_DOCKER_SCENARIO", str(fake.scenario_path))
    monkeypatch.setenv(KEY_ENV, SECRET)
    for name in ("CLAW_OPENCLAW_PULL", "CLAW_OPENCLAW_USER", "CLAW_OPENCLAW_ENV_ALLOW"):
        monkeypatch.delenv(name, raising=False)
    # The fake's agent runs on this machine and its specs name the stand-in on 127.0.0.1, as a real engine's containers
    # on the host network reach it (runners/openclaw/loopback.py refuses a loopback endpoint on a network of their own).
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")
    fake.script()
    return fake


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "agents" / "basic_agent"
    (directory / "workspace").mkdir(parents=True)
    (directory / "workspace" / "AGENTS.md").write_text("# Agents\nBe concise.\n")
    (directory / "workspace" / "SOUL.md").write_text("# Soul\n")
    (directory / "agent.yaml").write_text("schema_version: 1\nagent_id: basic_agent\ntitle: Basic Agent\n")
    return directory


@pytest.fixture
def make_spec(store: Store, agent_dir: Path, fake_docker: FakeDocker):
    tree = agent_workspace_tree(store, agent_dir)

    def make(**overrides: Any) -> OpenClawSpec:
        fields: dict[str, Any] = {
            "case_id": "case_one", "agent_id": "basic_agent", "agent_dir": agent_dir, "agent": basic_agent(),
            "agent_tree": tree, "requested_model": "test/model", "image": FAKE_IMAGE, "image_digest": FAKE_ID,
            "docker_cli": fake_docker.cli, "timeout_seconds": 30,
            "messages": [{"role": "user", "content": "Create report.md"}],
            "hints": {"expected_artifact": "report.md"},
            "provider_base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY_ENV,
        }
        fields.update(overrides)
        return OpenClawSpec(**fields)

    return make


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerEngine]:
    """A real Docker engine with the OpenClaw image loaded. Without one: a skip with the reason, and
    under CI=true a failure (CI must not pass with these tests silently not run)."""
    engine, reason = start_engine(tmp_path_factory.mktemp("dockerd"))
    if engine is None:
        message = f"real OpenClaw engine unavailable: {reason}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: .ci/run installs docker.io and mmdebstrap and prepares the image)",
                        pytrace=False)
        pytest.skip(message)
    try:
        yield engine
    finally:
        engine.stop()
