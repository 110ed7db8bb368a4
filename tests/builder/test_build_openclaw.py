"""openclaw campaigns through `claw build`, with the fake container CLI (fast, no engine needed)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.openclaw.conftest import FAKE_ID, FAKE_IMAGE, FakeDocker, basic_agent, fake_cli, payload
from tests.support.claw import Claw
from tests.support.judging import eval_profile, judge_reply
from tests.support.workspace import Workspace, write_yaml


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDocker]:
    cli = fake_cli(tmp_path / "bin")
    fake = FakeDocker(str(cli), tmp_path / "fake-state", tmp_path / "scenario.json")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(fake.state))
    monkeypatch.setenv("FAKE_DOCKER_SCENARIO", str(fake.scenario_path))
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")  # (the stand-in is on 127.0.0.1: runners/openclaw/loopback.py)
    fake.script(images={FAKE_IMAGE: {"Id": FAKE_ID}},
                turns=[{"write": {"report.md": "# Report\nAll done.\n"}, "payload": payload("Wrote report.md")}])
    yield fake
    fake.end_containers()  # (those a failed test left running)


def agent(ws: Workspace, agent_id: str, text: str) -> None:
    directory = ws.configs / "agents" / agent_id
    (directory / "workspace").mkdir(parents=True, exist_ok=True)
    (directory / "workspace" / "AGENTS.md").write_text(text)
    write_yaml(directory / "agent.yaml", basic_agent(agent_id))


def oc_case(ws: Workspace, case_id: str, prompt: str, **extra: Any) -> None:
    ws.case(case_id, prompt, runner={"type": "openclaw"}, input={
        "messages": [{"role": "user", "content": prompt}],
        "context": {"openclaw": {"expected_artifact": "report.md"}}}, **extra)


@pytest.fixture
def oc(ws: Workspace, docker: FakeDocker) -> Workspace:
    for path in (ws.configs / "cases").iterdir():  # only openclaw cases in this campaign
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    agent(ws, "basic_agent", "# Agents\nBe concise.\n")
    agent(ws, "writer_agent", "# Agents\nWrite well.\n")
    oc_case(ws, "oc_a", "Create report.md about apples.", deterministic_checks=[
        {"check_id": "report", "declarative": {"kind": "openclaw_workspace_file_present",
                                               "relative_path": "report.md", "contains_all": ["all done"]}}])
    oc_case(ws, "oc_b", "Create report.md about pears.")
    ws.suite("main", ["m1", "m2"], openclaw={"agent_assignments": [
        {"agent_id": "writer_agent", "case_selection": {"include_case_ids": ["oc_b"]}}]})
    write_yaml(ws.configs / "run_profiles" / "rp.yaml", {
        "schema_version": 1, "run_profile_id": "rp", "title": "OpenClaw",
        "openclaw": {"agent_id": "basic_agent", "image": FAKE_IMAGE, "timeout_seconds": 30,
                     "docker_cli": docker.cli},
        "execution_policy": {"max_concurrency": 2, "stop_on_runner_error": False}})
    return ws


def oc_cli(profile: Path) -> str:
    """The container CLI a run profile names."""
    return next(line.split(": ", 1)[1].strip() for line in profile.read_text().splitlines() if "docker_cli" in line)


def rows(out: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["model_id"], r["case_id"]): r for r in json.loads(out)["rows"]}


def test_openclaw_builds_are_incremental_per_agent_and_case(oc: Workspace, claw: Claw, docker: FakeDocker,
                                                            standin: StandIn) -> None:
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    assert {r["run"] for r in rows(out).values()} == {"exec"}
    started = len(docker.calls("run"))
    assert started == 8  # 4 runs × (validate + one turn)
    code, out, _ = claw.build("--output", "json")
    assert {r["run"] for r in rows(out).values()} == {"reuse"}
    assert len(docker.calls("run")) == started  # zero containers
    (oc.configs / "agents" / "basic_agent" / "workspace" / "AGENTS.md").write_text("# Agents\nBe brief.\n")
    code, out, _ = claw.build("--output", "json")
    assert {k for k, r in rows(out).items() if r["run"] == "exec"} == {("m1", "oc_a"), ("m2", "oc_a")}, out
    oc.edit("cases/oc_b/test.yaml", lambda d: d["input"]["messages"][0].update(content="About plums."))
    code, out, _ = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert "run m1 oc_b rep 0 (stale):" in out and "input.messages[0].content" in out
    code, out, _ = claw.build("--output", "json")
    assert {k for k, r in rows(out).items() if r["run"] == "exec"} == {("m1", "oc_b"), ("m2", "oc_b")}, out
    assert docker.live_containers() == []


def test_openclaw_workspace_evidence_is_checked(oc: Workspace, claw: Claw, docker: FakeDocker,
                                               standin: StandIn) -> None:
    eval_profile(oc, repetitions=1)
    standin.script("judge/j1", judge_reply(8))
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json", "--model", "m1")
    assert code == 0, err
    store = Store(Path(os.environ["CLAW_STORE"]))
    records = [store.get_action(k) for k, _ in store.iter_actions()]
    run = next(r for r in records if r.kind == "run" and r.address["case_id"] == "oc_a")
    files = {e.path for e in store.read_tree(run.outputs["workspace"])}
    assert "report.md" in files and "AGENTS.md" in files
    assert "+All done." in store.get_bytes(run.outputs["workspace_diff"]).decode()
    checks = next(r for r in records if r.kind == "checks" and r.address["case_id"] == "oc_a")
    assert checks.summary["checks"][0]["outcome"] == "passed"
    assert rows(out)[("m1", "oc_a")]["score"] == 8.0


def test_a_run_stopped_before_its_agent_started_cost_0_known(oc: Workspace, claw: Claw, docker: FakeDocker) -> None:
    """No container ran, so no request reached the provider; its cost is 0, known (QA, session 57: 'cost ? USD (4 of 4
    unknown)' for a model without pricing). Since session 80 a build whose engine cannot show the image is refused
    before it starts (tests/builder/test_build_openclaw_engine.py): here the image is shown and the engine then refuses
    every container (exit 125, none made: a daemon gone mid-build), which the runner's own check fails (retryable)."""
    docker.script(run_rc=125, run_stderr="docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                                         "Is the docker daemon running?\n")
    code, out, err = claw.build()
    assert code not in (0, 2) and "Traceback" not in out + err, out + err
    line = next(line for line in out.splitlines() if line.startswith("build "))
    assert line.endswith("; cost spent 0.000000 USD (4 of 4 priced)"), line
    code, out, err = claw("query", "select status, cost_usd, cost_source, input_tokens, error_code from runs",
                          "--format", "json")
    assert code == 0 and json.loads(out) == [
        {"status": "failed", "cost_usd": 0.0, "cost_source": "priced", "input_tokens": 0,
         "error_code": "openclaw_engine_unavailable"}] * 4, out + err


def test_a_models_prices_run_no_openclaw_run_again_and_a_store_keyed_with_them_keeps_its_runs(
        oc: Workspace, claw: Claw, docker: FakeDocker, tmp_path: Path) -> None:
    # before session 58 the id of openclaw.json, which carries the prices, was in the run key: editing a price ran
    # every OpenClaw run again; a store built then (by that claw) keeps its runs under the key they had
    from tests.support.oldclaw import old_claw, old_clawstore

    old = old_clawstore(tmp_path / "old")
    prices = {"m1": {"pricing": {"input": 3.0, "output": 15.0}}, "m2": {"cost": {"input": 1.0, "output": 5.0}}}
    oc.edit("suites/main.yaml", lambda d: [m.update(prices[m["model_id"]]) for m in d["models"]])
    built = old_claw(old, oc.root, "build", "--suite", "main", "--run-profile", "rp")
    assert built.returncode == 0, built.stdout + built.stderr
    started = len(docker.calls("run"))
    assert started == 8
    code, out, err = claw.build("--output", "json")
    assert code == 0 and {r["run"] for r in rows(out).values()} == {"reuse"}, out + err
    assert len(docker.calls("run")) == started  # zero containers
    oc.edit("suites/main.yaml", lambda d: [m.update({k: {"input": 9.0, "output": 9.0} for k in m if k in (
        "pricing", "cost")}) for m in d["models"]])
    code, out, err = claw.build("--output", "json")
    assert code == 0 and {r["run"] for r in rows(out).values()} == {"reuse"}, out + err
    # (before session 59 the first edit after the upgrade ran all 8 again: the build that reused them under the old key
    # recorded nothing under the new one)
    assert len(docker.calls("run")) == started
    oc.edit("suites/main.yaml", lambda d: [m.update({k: {"input": 2.0, "output": 4.0} for k in m if k in (
        "pricing", "cost")}) for m in d["models"]])
    code, out, err = claw.build("--output", "json")
    assert code == 0 and {r["run"] for r in rows(out).values()} == {"reuse"}, out + err
    assert len(docker.calls("run")) == started  # and never again


def test_explain_names_the_workspace_files_an_agent_edit_changed(oc: Workspace, claw: Claw, docker: FakeDocker,
                                                                 standin: StandIn) -> None:
    """`claw explain` after an agent's workspace template is edited names the files (it said two tree ids alone:
    the user could not tell an edited skill from a stray editor file)."""
    skill = oc.configs / "agents" / "basic_agent" / "workspace" / "skills" / "fetch"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# fetch\nUse curl.\n")
    (skill / "run.sh").write_text("#!/bin/sh\ncurl \"$1\"\n")
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    (skill / "SKILL.md").write_text("# fetch\nUse wget.\n")
    (skill / "run.sh").chmod(0o755)
    (skill / "notes.txt").write_text("new\n")
    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    [reason] = {line.strip() for line in out.splitlines() if "agent_tree" in line}
    assert reason.endswith(": skills/fetch/SKILL.md changed, skills/fetch/notes.txt added, "
                           "skills/fetch/run.sh mode 644 -> 755"), out
    assert "run m1 oc_a rep 0 (stale):" in out and "oc_b" not in out  # (writer_agent's case: not stale)
    code, out, _ = claw.build("--output", "json")
    assert {k for k, r in rows(out).items() if r["run"] == "exec"} == {("m1", "oc_a"), ("m2", "oc_a")}, out



def test_explain_names_a_workspace_file_on_one_line_whatever_its_name(oc: Workspace, claw: Claw, docker: FakeDocker,
                                                                      standin: StandIn) -> None:
    # a file name is any bytes but / and NUL: a line break or a terminal escape in one must not forge explain's lines
    skill = oc.configs / "agents" / "basic_agent" / "workspace" / "skills"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# skills\n")
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    (skill / "x\nrun m9 forged rep 0 (stale):\x1b[2J").write_text("new\n")
    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    assert "\x1b" not in out and not any(line.startswith("run m9") for line in out.splitlines()), out
    [reason] = {line.strip() for line in out.splitlines() if "agent_tree" in line}
    assert reason.endswith(": skills/x\\x0arun m9 forged rep 0 (stale):\\x1b[2J added"), out


def test_claw_view_shows_an_openclaw_runs_workspace_diff(oc: Workspace, claw: Claw, tmp_path: Path) -> None:
    """What an agent left is an OpenClaw run's answer: before session 60 the page's run details showed the trace
    (runner events, the final "Wrote report.md") and no diff, which only `claw cat <its object>` showed."""
    code, out, err = claw.build("--model", "m1", "--case", "oc_a")
    assert code == 0, out + err
    page = tmp_path / "page.html"
    code, out, err = claw("view", "--suite", "main", "--run-profile", "rp", "-o", str(page))
    assert code == 0, out + err
    [shard] = (tmp_path / "page.html.d").iterdir()
    details = json.loads(shard.read_text().split(",", 2)[2].rsplit(")", 1)[0])
    [run] = [d for d in details if d["case_id"] == "oc_a"]
    assert "+++ workspace/report.md" in run["workspace_diff"] and "+All done." in run["workspace_diff"]
    assert "workspaceDiff" in page.read_text()  # the page draws it


def test_explain_says_an_image_digest_it_cannot_read_is_unknown_not_changed(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:
    """Nothing edited, but the engine no longer shows the image (another shell without `DOCKER_HOST`, the engine
    stopped, the image removed): the run's key cannot be made, and `claw explain` must say why, not
    `runner.image_digest changed` (what it said in session 78: the user looked for the edit they had not made)."""
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    docker.script(images={})  # the engine answers, without the image
    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    reasons = {line.strip() for line in out.splitlines() if "image_digest" in line}
    assert reasons and all("could not be read" in r and FAKE_IMAGE in r for r in reasons), out
    assert "runner.image_digest changed" not in out, out


def test_claw_query_counts_the_tool_calls_an_openclaw_agent_reported(oc: Workspace, claw: Claw, docker: FakeDocker,
                                                                      standin: StandIn) -> None:
    """OpenClaw reports each turn's tool calls (`meta.toolSummary.calls`); `claw query`'s runs.tool_calls was NULL for
    every OpenClaw run (session 78: an agent that had written two files with `write` read NULL, so "which agent used
    its tools" had no answer)."""
    docker.script(images={FAKE_IMAGE: {"Id": FAKE_ID}}, turns=[
        {"write": {"report.md": "# Report\nAll done.\n"},
         "payload": payload("Wrote report.md", tools=["write", "read"])}])
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    code, out, err = claw("query", "select distinct tool_calls from runs", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == [{"tool_calls": 2}], out


def test_a_build_validates_each_agent_and_models_config_once_and_a_forced_one_none(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:
    """Two cases for basic_agent and one for writer_agent, one model, one run at a time: two validations, not three
    (runners/openclaw/validated.py); `--force` runs all three again and validates none of them."""
    oc_case(oc, "oc_c", "Create report.md about plums.")
    oc.edit("run_profiles/rp.yaml", lambda d: d["execution_policy"].update(max_concurrency=1))

    def validations() -> int:
        return sum(1 for c in docker.calls("run") if c["container_argv"][:3] == ["openclaw", "config", "validate"])

    code, out, err = claw.build("--output", "json", "--model", "m1")
    assert code == 0 and {r["run"] for r in rows(out).values()} == {"exec"} and len(rows(out)) == 3, out + err
    assert validations() == 2 and len(docker.calls("agent")) == 3
    code, out, err = claw.build("--output", "json", "--model", "m1", "--force")
    assert code == 0 and {r["run"] for r in rows(out).values()} == {"exec"}, out + err
    assert validations() == 2 and len(docker.calls("agent")) == 6
