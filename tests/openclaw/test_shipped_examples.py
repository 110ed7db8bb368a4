"""The shipped OpenClaw example (configs/: basic_agent, openclaw_local, the openclaw_* cases) runs as
shipped, with the key in OPENROUTER_API_KEY, against the image CI builds — only the model server is the
stand-in and the engine is a private one. Each real-engine run costs seconds, so this one build proves
what a build of OpenClaw cases stores (the workspace, its diff, the trace; the key nowhere), that one
session spans a case's turns, and that a second build sends zero requests and starts zero containers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.store import Store
from clawstore.testing.standin import StandIn, key_fingerprint, text, tool_calls
from tests.openclaw.engine import IMAGE_SCRIPT, REPO, DockerEngine
from tests.support.workspace import SECRET

pytestmark = pytest.mark.timeout(1200)
SHIPPED = REPO / "clawstore" / "demo" / "configs"  # the packaged examples (configs/ starts as their copy)
MODEL = "openai/gpt-4o-mini"  # configs/suites/openclaw_examples.yaml
FILES = {"report.md": "# Daily check\n2026-01-01\nclaw-openclaw-report\n",
         "notes.md": "# Notes\nturn-one-marker\n",
         "summary.md": "# Summary\nturn-two-marker\nnotes.md says turn-one-marker.\n"}


def test_example_run_profile_names_the_image_ci_builds() -> None:
    profile = yaml.safe_load((SHIPPED / "run_profiles" / "openclaw_local.yaml").read_text())
    tag = subprocess.run(["bash", str(IMAGE_SCRIPT), "--print-tag"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert profile["openclaw"]["image"] == tag


def test_shipped_openclaw_examples_build_as_shipped(docker_engine: DockerEngine, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(SHIPPED, tmp_path / "ws" / "configs")
    monkeypatch.chdir(tmp_path / "ws")
    # The shipped profile's `docker` found first on PATH: a wrapper that records every command line.
    argv_log = tmp_path / "docker-argv.log"
    wrapper = tmp_path / "bin" / "docker"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {argv_log}\nexec {shutil.which("docker")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")  # the containers reach the stand-in on 127.0.0.1
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    with StandIn() as standin:
        monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
        # Three turns in all (1 + 2), in whichever order the cases run: each writes every file, then answers.
        writes = tool_calls(*({"name": "write", "arguments": {"path": p, "content": c}, "id": f"call_{i}"}
                              for i, (p, c) in enumerate(FILES.items())))
        standin.script(MODEL, *[writes, text("Done: the files are written.")] * 3)
        build = ["build", "--suite", "openclaw_examples", "--run-profile", "openclaw_local", "--output", "json"]
        built = CliRunner().invoke(main, build)
        requests = standin.requests
        started = argv_log.read_text().count("run ")
        again = CliRunner().invoke(main, build)
        assert again.exit_code == 0, again.output
        assert {row["run"] for row in json.loads(again.stdout)["rows"]} == {"reuse"}
        assert len(standin.requests) == len(requests)  # zero requests
        assert argv_log.read_text().count("run ") == started  # zero containers
    assert built.exit_code == 0, built.output
    rows = {row["case_id"]: row for row in json.loads(built.stdout)["rows"]}
    assert set(rows) == {"openclaw_report_file", "openclaw_two_turn_notes"}
    assert all(row["run"] == "exec" and row["status"] == "success" for row in rows.values()), rows
    assert len(requests) == 6 and {r["model"] for r in requests} == {MODEL}
    # OpenClaw streamed every request with the key from the env-file, which is on no command line; it
    # must not see a variable its plugins interpret (2026.9.6 took OPENROUTER_API_KEY as a configured
    # perplexity plugin and tried to npm-install it on turn 2).
    assert all(r["stream"] for r in requests) and {r["key_fingerprint"] for r in requests} == {key_fingerprint(SECRET)}
    argv = argv_log.read_text()
    assert "run --rm" in argv and SECRET not in argv
    # One session per case: the two-turn case's containers share one id, and its last request carries
    # the first turn's exchange.
    sessions = [line.split("--session-id ")[1].split()[0] for line in argv.splitlines() if "--session-id" in line]
    assert sorted(sessions.count(s) for s in set(sessions)) == [1, 2]
    second_turn = [json.dumps(r["messages"]) for r in requests if "Read `notes.md`" in json.dumps(r["messages"])]
    assert second_turn and all("Create `notes.md`" in m and "Done: the files are written." in m for m in second_turn)
    store = Store(tmp_path / "store")
    record = store.get_action(rows["openclaw_two_turn_notes"]["key"])
    assert record is not None
    files = {e.path: store.get_bytes(e.object).decode() for e in store.read_tree(record.outputs["workspace"])
             if e.type == "file"}
    assert files["summary.md"] == FILES["summary.md"] and files["notes.md"] == FILES["notes.md"]
    finals = [e["content"] for e in store.get_json(record.outputs["artifact"])["trace"]
              if e["event_type"] == "final_output"]
    assert finals == ["Done: the files are written."] * 2
    config = json.loads(store.get_bytes(record.outputs["openclaw_config"]))
    assert config["models"]["providers"]["openrouter"]["apiKey"] == "${CLAWSTORE_PROVIDER_API_KEY}"
    assert config["plugins"] == {"enabled": False}
    # The agent's prompt reached OpenClaw through AGENTS.md (2026.9.6 has no config key for it).
    assert "## Agent prompt\n\nWork in the workspace" in files["AGENTS.md"]
    assert "use tools to verify what you claim" in json.dumps(requests[0]["messages"])
    # The single-turn case: its file, the diff against the agent's workspace, the trace, the usage.
    report = store.get_action(rows["openclaw_report_file"]["key"])
    assert report is not None
    workspace = {e.path: store.get_bytes(e.object).decode() for e in store.read_tree(report.outputs["workspace"])
                 if e.type == "file"}
    assert workspace["report.md"] == FILES["report.md"]
    diff = store.get_bytes(report.outputs["workspace_diff"]).decode()
    assert "+++ workspace/report.md" in diff and "+claw-openclaw-report" in diff
    artifact = store.get_json(report.outputs["artifact"])
    assert [e["content"] for e in artifact["trace"] if e["event_type"] == "final_output"] == [
        "Done: the files are written."]
    assert "write" in artifact["runner_metadata"]["openclaw"]["metadata"]["observable_summary"]["tool_summary"]["tools"]
    assert artifact["usage"]["normalized"]["input_tokens"] > 0
    assert not any(SECRET.encode() in store.get_bytes(oid) for oid in store.iter_objects())  # the key nowhere
    assert docker_engine.our_containers() == []
