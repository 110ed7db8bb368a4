"""End to end with a real Docker engine, the real OpenClaw CLI and the stand-in model server.

The containers reach the stand-in on 127.0.0.1 through host networking; OpenClaw streams its
requests (SSE) and its `write` tool creates the files the scripted replies ask for.
Skipped, with the reason, when no engine or image can be had (see tests/openclaw/engine.py).
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clawstore.runners.openclaw import agent_workspace_tree, resolve_image_digest, run_openclaw
from clawstore.runners.openclaw.orphans import stop_orphans
from clawstore.runners.openclaw.runner import OpenClawSpec
from clawstore.store import Store
from clawstore.testing.standin import StandIn, hang, tool_call
from tests.openclaw.conftest import KEY_ENV, SECRET, basic_agent
from tests.openclaw.engine import DockerEngine, cached_image_id
from tests.support.watchdogs import kill_watchdogs

pytestmark = pytest.mark.timeout(900)  # the first use may build the image (about 2 minutes)
MODEL = "test/model"


@pytest.fixture
def engine_env(docker_engine: DockerEngine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict:
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")
    monkeypatch.setenv(KEY_ENV, SECRET)
    # A recording wrapper around the real CLI: proves what is (not) on the command line.
    real = shutil.which("docker")
    log = tmp_path / "docker-argv.log"
    wrapper = tmp_path / "bin" / "docker"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return {"cli": str(wrapper), "argv_log": log, "engine": docker_engine}


@pytest.fixture
def real_spec(engine_env: dict, store: Store, agent_dir: Path):
    engine: DockerEngine = engine_env["engine"]
    tree = agent_workspace_tree(store, agent_dir)

    def make(base_url: str, **overrides) -> OpenClawSpec:
        fields = {"case_id": "real_case", "agent_id": "basic_agent", "agent_dir": agent_dir,
                  "agent": basic_agent(agent={"id": "basic-agent"}), "agent_tree": tree,
                  "requested_model": MODEL, "image": engine.image,
                  "image_digest": resolve_image_digest(engine.image, engine_env["cli"]),
                  "docker_cli": engine_env["cli"], "timeout_seconds": 240,
                  "messages": [{"role": "user", "content": "Create report.md with the marker."}],
                  "hints": {"expected_artifact": "report.md"}, "provider_base_url": base_url,
                  "api_key_env": KEY_ENV}
        fields.update(overrides)
        return OpenClawSpec(**fields)

    return make


def test_the_engine_runs_the_image_the_cache_holds(docker_engine: DockerEngine) -> None:
    """The other half of test_image_reproducible.py: the cached archive it compares with is what runs."""
    cached = cached_image_id()
    if cached is None:  # CLAW_TEST_DOCKER_HOST's engine had the image already: nothing was built here
        pytest.skip("no cached image archive on this machine to compare the engine's image with")
    loaded = docker_engine.docker("image", "inspect", "--format", "{{.Id}}", docker_engine.image)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == cached


def test_timeout_ends_the_run_and_leaves_no_container(real_spec, engine_env, store, tmp_path):
    with StandIn() as standin:
        standin.script(MODEL, hang(120))
        spec = real_spec(standin.base_url, timeout_seconds=15)
        began = time.monotonic()
        outcome = run_openclaw(spec, store, tmp_path)
        took = time.monotonic() - began
    assert outcome.status == "timed_out", outcome.artifact["error"]
    assert outcome.artifact["error"]["code"] == "openclaw_timeout"
    assert took < 15 + 20
    engine: DockerEngine = engine_env["engine"]
    assert engine.our_containers() == []
    assert engine.docker("ps", "-q").stdout.strip() == ""


def test_an_agent_still_looping_at_the_timeout_after_its_model_answered_is_its_outcome(real_spec, engine_env, store,
                                                                                       tmp_path):
    """The agent's model answers every request with one more tool call: the run reaches its timeout after answered
    requests, which OpenClaw's session transcript shows (2026.9.6 keeps it in the agent's SQLite database: runners/
    openclaw/transcript.py): kept (openclaw_agent_timeout), not a fault the next build pays for again
    (tests/builder/test_openclaw_agent_timeout.py, with the fake container)."""
    with StandIn() as standin:
        standin.script(MODEL, *[tool_call("write", {"path": f"loop/{i}.txt", "content": f"step {i}"}, call_id=f"c{i}")
                                for i in range(2000)])
        prices = {"input": 3.0, "output": 15.0}
        # (The first request comes 17 s after the start at load 0.6, within 14 s in CI: 45 s leaves room to loop;
        # every second past that is the test's wall, 91 s at timeout_seconds=90.)
        outcome = run_openclaw(real_spec(standin.base_url, timeout_seconds=45, model_extras={"pricing": prices}),
                               store, tmp_path)
        asked = len(standin.requests)
    assert asked >= 2, asked
    assert outcome.status == "timed_out", outcome.artifact["error"]
    skipped = [e["metadata"] for e in outcome.artifact["trace"] if e.get("name") == "session_database_skipped"]
    assert outcome.artifact["error"]["code"] == "openclaw_agent_timeout", (outcome.artifact["error"], skipped)
    assert engine_env["engine"].our_containers() == []
    # What it spent at least: the usage its transcript rows count (its cost unknown: one may have been in flight).
    usage = outcome.artifact["usage"]
    assert usage["cost_usd"] is None and usage["cost_source"] == "unknown", usage
    assert 1 <= usage["answered_requests"] <= asked and usage["input_tokens_known"] > 0, (asked, usage)
    assert usage["output_tokens_known"] > 0 and usage["cost_known_usd"] == pytest.approx(
        (usage["input_tokens_known"] * 3.0 + usage["output_tokens_known"] * 15.0) / 1e6), usage


def test_a_container_the_engine_killed_after_answered_requests_spent_what_its_transcript_shows(
        real_spec, engine_env, store, tmp_path):
    """The engine kills the container (`docker kill`, as its OOM killer would) while the agent loops on tool calls its
    model answers: no result, a fault retried (openclaw_execution_failed, never kept), its spend unknown with what
    OpenClaw's transcript shows answered as its known part (before session 62: `?` alone; only a timeout's was read)."""
    engine: DockerEngine = engine_env["engine"]
    prices = {"input": 3.0, "output": 15.0}
    ended: dict = {}
    with StandIn() as standin:
        standin.script(MODEL, *[tool_call("write", {"path": f"loop/{i}.txt", "content": f"step {i}"}, call_id=f"c{i}")
                                for i in range(2000)])
        spec = real_spec(standin.base_url, timeout_seconds=200, model_extras={"pricing": prices})
        running = threading.Thread(target=lambda: ended.update(outcome=run_openclaw(spec, store, tmp_path)))
        running.start()
        waited = time.monotonic() + 150
        while len(standin.requests) < 4 and time.monotonic() < waited and running.is_alive():
            time.sleep(0.2)
        assert len(standin.requests) >= 4, standin.requests
        for name in engine.our_containers():  # (the turn's: validation ended before any request)
            engine.docker("kill", name)
        running.join(120)
        asked = len(standin.requests)
    outcome = ended["outcome"]
    assert outcome.status == "failed" and outcome.artifact["error"]["code"] == "openclaw_execution_failed", (
        outcome.artifact["error"])
    assert "exited 137" in outcome.artifact["error"]["message"], outcome.artifact["error"]
    skipped = [e["metadata"] for e in outcome.artifact["trace"] if e.get("name") == "session_database_skipped"]
    usage = outcome.artifact["usage"]
    assert usage["cost_usd"] is None and usage["cost_source"] == "unknown", usage
    assert 1 <= usage.get("answered_requests", 0) <= asked and usage["input_tokens_known"] > 0, (asked, usage, skipped)
    assert usage["output_tokens_known"] > 0 and usage["cost_known_usd"] == pytest.approx(
        (usage["input_tokens_known"] * 3.0 + usage["output_tokens_known"] * 15.0) / 1e6), usage
    assert engine.our_containers() == []


BUILD_PROCESS = """
import pickle, sys
from pathlib import Path
from clawstore.runners.openclaw import run_openclaw
from clawstore.store import Store
spec, store_dir, workdir, build_id = pickle.loads(Path(sys.argv[1]).read_bytes()), sys.argv[2], Path(sys.argv[3]), \
    sys.argv[4]
store = Store(store_dir)
with store.lease("build " + build_id):  # as builder/engine.py holds it
    run_openclaw(spec, store, workdir, build_id=build_id)
"""


def _build_killed_at_its_turn(real_spec, engine: DockerEngine, store: Store, tmp_path: Path, standin: StandIn,
                              build_id: str, watchdog_too: bool) -> list[str]:
    """A process holding a build's lease starts a real container and is SIGKILLed (its watchdog first, if
    `watchdog_too`) while its agent waits for the model: the names of the build's containers then."""
    spec_file, workdir = tmp_path / "spec.pickle", tmp_path / "work"
    spec_file.write_bytes(pickle.dumps(real_spec(standin.base_url, timeout_seconds=120)))
    workdir.mkdir()
    build = subprocess.Popen([sys.executable, "-c", BUILD_PROCESS, str(spec_file), str(store.root), str(workdir),
                              build_id], env=dict(os.environ))
    try:
        deadline = time.monotonic() + 90
        names: list[str] = []
        while not names and time.monotonic() < deadline and build.poll() is None:
            time.sleep(0.2)
            names = [n for n in _labelled(engine, build_id) if n.endswith("-turn1")]
        assert names, f"no agent container (build exited {build.poll()})"
        if watchdog_too:
            assert kill_watchdogs(store.root), "the build has a watchdog"
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    return names


def _labelled(engine: DockerEngine, build_id: str) -> list[str]:
    return engine.docker("ps", "-a", "--filter", f"label=clawstore.openclaw.build={build_id}", "--format",
                         "{{.Names}}").stdout.split()


def test_a_killed_builds_container_is_removed_by_its_watchdog_within_seconds(real_spec, engine_env, store, tmp_path):
    """Before session 80 the container outlived its SIGKILLed build (its `docker run` is in a session of its own), its
    agent at work, until the next build's or gc's stop_orphans: now the build's watchdog removes it, nothing swept."""
    engine: DockerEngine = engine_env["engine"]
    build_id = "20261201T000000-deadbeef"
    with StandIn() as standin:
        standin.script(MODEL, hang(120))  # the agent's turn waits for the model
        assert _build_killed_at_its_turn(real_spec, engine, store, tmp_path, standin, build_id, watchdog_too=False)
        began = time.monotonic()
        while _labelled(engine, build_id) and time.monotonic() - began < 60:  # (a bound: ~1 s at load 1)
            time.sleep(0.1)
        took = time.monotonic() - began
    assert _labelled(engine, build_id) == [], f"still there {took:.0f} s after the build's SIGKILL"
    assert engine.our_containers() == []
    while list((store.root / "containers").iterdir()) and time.monotonic() - began < 60:  # (its record goes next)
        time.sleep(0.1)
    assert list((store.root / "containers").iterdir()) == []
    assert stop_orphans(store).stopped == []  # (nothing left for the backstop)


def test_a_killed_builds_container_its_watchdog_killed_too_runs_on_until_the_next_sweep_stops_it(
        real_spec, engine_env, store, tmp_path):
    """The backstop: the watchdog killed with its build (a kill of every process, a reboot), the container runs on
    until stop_orphans, what the next build and gc call."""
    engine: DockerEngine = engine_env["engine"]
    build_id = "20261201T000000-feedbeef"
    with StandIn() as standin:
        standin.script(MODEL, hang(120))
        names = _build_killed_at_its_turn(real_spec, engine, store, tmp_path, standin, build_id, watchdog_too=True)
        time.sleep(1)
        assert [n for n in _labelled(engine, build_id) if n.endswith("-turn1")] == names  # running on
        report = stop_orphans(store)
    assert report.stopped == [f"{names[0]} (build {build_id})"] and report.unanswered == []
    assert engine.our_containers() == [] and list((store.root / "containers").iterdir()) == []


def test_an_exit_125_is_the_engines_refusal_only_when_it_made_no_container(docker_engine: DockerEngine,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    """`docker run` exits 125 when the engine refuses, and when the container's own process does: the engine writes
    --cidfile once it has made the container (and --rm leaves it), so one that ran is told from one never made."""
    from clawstore.runners.openclaw.container import ContainerRunner, EngineSettings

    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    settings = EngineSettings.from_env("docker")
    root = tmp_path / "run"
    root.mkdir()
    ran = ContainerRunner(settings, docker_engine.image, root, {}, "ran125").run("turn1", ["sh", "-c", "exit 125"],
                                                                                   60.0)
    assert (ran.returncode, ran.started, ran.engine_error is not None) == (125, True, True), ran
    refused = ContainerRunner(settings, "example.test/absent:1", root, {}, "refused125").run("turn1", ["true"], 60.0)
    assert (refused.returncode, refused.started) == (125, False), refused
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # (no cidfile directory left behind)
    assert docker_engine.our_containers() == []


def test_an_agent_refused_with_a_402_is_out_of_credit(real_spec, engine_env, store, tmp_path):
    """The real OpenClaw's record of a provider out of credit (a 402 without Retry-After, OpenRouter's words): its
    transcript's last request refused with "402 <the provider's message>", which claw reads (transcript.py): the run is
    `openclaw_out_of_credit`, a fault, and the build stops the endpoint. (2026.9.6, session 76: one request, the turn
    exits 1; 37 s with the engine's start and the image's load.)"""
    words = "Insufficient credits. Add more using https://openrouter.ai/settings/credits"
    with StandIn() as standin:
        standin.script(MODEL, {"status": 402, "body": {"error": {"code": 402, "message": words}}})
        outcome = run_openclaw(real_spec(standin.base_url, timeout_seconds=120), store, tmp_path)
        asked = len(standin.requests)
    error = outcome.artifact["error"]
    assert outcome.status == "failed" and error["code"] == "openclaw_out_of_credit", (error, asked)
    assert error["metadata"]["provider_message"] == words and error["provider_code"] == "402", error
    assert asked >= 1 and error["metadata"]["turn_error"] == "openclaw_execution_failed", (asked, error)


def test_the_validate_container_leaves_the_mounted_root_as_it_found_it(docker_engine: DockerEngine,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path, store: Store,
                                                                        agent_dir: Path) -> None:
    """What makes a remembered validation safe to skip (runners/openclaw/validated.py): the real `openclaw config
    validate` writes nothing under /work (no state, no home file, no migrated config), so a run that skips it starts
    its first turn from the very files it would have; its key, read from that root, is the same after as before.
    (OpenClaw 2026.9.6: ~2 s of a core, one container.)"""
    from clawstore.runners.openclaw import config as oc_config
    from clawstore.runners.openclaw.container import ContainerRunner, EngineSettings, container_env
    from clawstore.runners.openclaw.runner import VALIDATE_ARGV
    from clawstore.runners.openclaw.validated import root_listing, validation_key

    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv(KEY_ENV, SECRET)
    root = tmp_path / "run"
    store.checkout(agent_workspace_tree(store, agent_dir), root / "workspace")
    for name in ("state", "home"):
        (root / name).mkdir()
    doc = oc_config.render_config(basic_agent(agent={"id": "basic-agent"}), MODEL, {}, "http://127.0.0.1:9/v1", KEY_ENV)
    (root / "openclaw.json").write_bytes(oc_config.config_bytes(doc))
    settings = EngineSettings.from_env("docker")
    env = container_env(KEY_ENV)
    digest = resolve_image_digest(docker_engine.image, "docker")
    before, key = root_listing(root), validation_key(docker_engine.image, digest, settings, VALIDATE_ARGV, env, root)
    runner = ContainerRunner(settings, docker_engine.image, root, env, "validateonce")
    inv = runner.run("validate", VALIDATE_ARGV, 120.0)
    assert inv.ok and '"valid":true' in inv.stdout.replace(" ", ""), (inv.returncode, inv.stdout, inv.stderr)
    assert root_listing(root) == before
    assert key is not None and validation_key(docker_engine.image, digest, settings, VALIDATE_ARGV, env, root) == key
    assert docker_engine.our_containers() == []
