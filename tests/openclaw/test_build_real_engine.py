"""`claw build` of an openclaw campaign with the real engine and the real OpenClaw CLI: what a single-turn
run stores (the report, the diff, the trace, the key nowhere), then a second build that sends zero model
requests and starts zero containers. (The two-turn case is proven by test_shipped_examples.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.store import Store
from clawstore.testing.standin import StandIn, key_fingerprint, text, tool_call
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
        # OpenClaw really talked to the stand-in, streaming, with the key from the env-file.
        assert all(r["stream"] for r in standin.requests)
        assert {r["key_fingerprint"] for r in standin.requests} == {key_fingerprint(SECRET)}
        store = Store(tmp_path / "store")
        record = store.get_action(row["key"])
        assert record is not None
        files = {e.path: store.get_bytes(e.object) for e in store.read_tree(record["outputs"]["workspace"])
                 if e.type == "file"}
        assert files["report.md"] == b"# Report\nbuilt\n"
        diff = store.get_bytes(record["outputs"]["workspace_diff"]).decode()
        assert "+++ workspace/report.md" in diff and "+built" in diff
        art = store.get_json(record["outputs"]["artifact"])
        assert [r["artifact_id"] for r in art["output_artifacts"]] == ["openclaw_key_output_1"]
        assert [e["content"] for e in art["trace"] if e["event_type"] == "final_output"] == ["Created report.md."]
        assert "write" in art["runner_metadata"]["openclaw"]["metadata"]["observable_summary"]["tool_summary"]["tools"]
        assert art["usage"]["normalized"]["input_tokens"] > 0
        # The key is in no stored object and on no docker command line.
        assert not any(SECRET.encode() in store.get_bytes(oid) for oid in store.iter_objects())
        assert "run --rm" in log.read_text()
        second = CliRunner().invoke(main, ["build", "--suite", "oc", "--run-profile", "oc", "--output", "json"])
        assert second.exit_code == 0, second.output
        assert json.loads(second.stdout)["rows"][0]["run"] == "reuse"
        assert len(standin.requests) == sent
        assert log.read_text().count("run ") == started  # zero containers
    assert docker_engine.our_containers() == []
    assert SECRET not in log.read_text()

