"""`claw build` of an openclaw campaign with the real engine and the real OpenClaw CLI: the second build
sends zero model requests and starts zero containers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.testing.standin import StandIn, text, tool_call
from tests.openclaw.conftest import basic_agent
from tests.openclaw.engine import DockerEngine
from tests.support.workspace import SECRET, Workspace, write_yaml

pytestmark = pytest.mark.timeout(900)
MODEL = "test/model"


def test_second_build_starts_no_container(docker_engine: DockerEngine, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "docker-argv.log"
    wrapper = tmp_path / "bin" / "docker"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {shutil.which("docker")} "$@"\n')
    wrapper.chmod(0o755)
    ws = Workspace(tmp_path / "ws")
    (ws.configs / "agents" / "basic_agent" / "workspace").mkdir(parents=True)
    (ws.configs / "agents" / "basic_agent" / "workspace" / "AGENTS.md").write_text("# Agents\nBe concise.\n")
    write_yaml(ws.configs / "agents" / "basic_agent" / "agent.yaml", basic_agent(agent={"id": "basic-agent"}))
    ws.case("report", "Create report.md.", runner={"type": "openclaw"}, input={
        "messages": [{"role": "user", "content": "Create report.md with the marker."}],
        "context": {"openclaw": {"expected_artifact": "report.md"}}})
    write_yaml(ws.configs / "suites" / "oc.yaml", {"schema_version": 1, "suite_id": "oc", "title": "OpenClaw",
                                                   "models": [{"model_id": "m", "requested_model": MODEL}]})
    write_yaml(ws.configs / "run_profiles" / "oc.yaml", {
        "schema_version": 1, "run_profile_id": "oc", "title": "OpenClaw",
        "openclaw": {"agent_id": "basic_agent", "image": docker_engine.image, "timeout_seconds": 240,
                     "docker_cli": str(wrapper)}})
    monkeypatch.chdir(ws.root)
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    with StandIn() as standin:
        monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
        standin.script(MODEL, tool_call("write", {"path": "report.md", "content": "# Report\nbuilt\n"}),
                       text("Created report.md."))
        first = CliRunner().invoke(main, ["build", "--suite", "oc", "--run-profile", "oc", "--output", "json"])
        assert first.exit_code == 0, first.output
        [row] = json.loads(first.stdout)["rows"]
        assert row["run"] == "exec" and row["status"] == "success"
        sent, started = len(standin.requests), log.read_text().count("run ")
        assert sent >= 2 and started >= 2
        second = CliRunner().invoke(main, ["build", "--suite", "oc", "--run-profile", "oc", "--output", "json"])
        assert second.exit_code == 0, second.output
        assert json.loads(second.stdout)["rows"][0]["run"] == "reuse"
        assert len(standin.requests) == sent
        assert log.read_text().count("run ") == started  # zero containers
    assert docker_engine.our_containers() == []
    assert SECRET not in log.read_text()

