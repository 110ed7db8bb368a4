"""An agent template holding the setup state an older OpenClaw wrote (`openclaw onboard` 2026.4.x leaves
`.openclaw/workspace-state.json` in the workspace): OpenClaw 2026.9.6, the release claw is tested with, refuses every
run of it with "Legacy workspace setup state requires migration" (the reference corpus's basic_agent fails each run
so). The template is valid, so `claw validate` passes, and says it in one warning line before anything is paid."""

from __future__ import annotations

import json

import pytest

from tests.builder.test_build_openclaw import docker, oc  # noqa: F401  (fixtures)
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.workspace import Workspace, write_yaml

# What the reference corpus's basic_agent holds (written by `openclaw onboard` 2026.4.x).
LEGACY_STATE = {"version": 1, "bootstrapSeededAt": "2026-04-22T21:47:32.611Z"}


def _agent(workspace: Workspace, *state_files: str) -> None:
    directory = workspace.configs / "agents" / "basic_agent"
    (directory / "workspace").mkdir(parents=True)
    (directory / "workspace" / "AGENTS.md").write_text("# Agents\n")
    for name in state_files:
        (directory / "workspace" / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / "workspace" / name).write_text(json.dumps(LEGACY_STATE))
    write_yaml(directory / "agent.yaml", {"schema_version": 1, "agent_id": "basic_agent", "title": "Basic"})


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


@pytest.mark.parametrize("name", [".openclaw/workspace-state.json", "openclaw-workspace-state.json"])
def test_validate_warns_of_an_older_openclaws_setup_state_in_a_template(ws: Workspace, claw: Claw,  # noqa: F811
                                                                        name: str) -> None:
    _agent(ws, name)
    code, out, err = claw("validate")
    assert code == 0, out + err
    [line] = _warnings(err)
    assert "configs/agents/basic_agent/agent.yaml" in line and f"workspace/{name}" in line, line
    assert "Legacy workspace setup state requires migration" in line and "2026.9.6" in line, line


def test_a_template_without_it_gives_no_warning(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    _agent(ws, ".openclaw/other.json")
    code, out, err = claw("validate")
    assert code == 0 and not _warnings(err), out + err


def test_a_plan_of_a_campaign_using_the_agent_says_it_once(oc: Workspace, claw: Claw,  # noqa: F811
                                                          docker: FakeDocker) -> None:  # noqa: F811
    state = oc.configs / "agents" / "basic_agent" / "workspace" / ".openclaw" / "workspace-state.json"
    state.parent.mkdir()
    state.write_text(json.dumps(LEGACY_STATE))
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp")
    assert code == 0, out + err
    [line] = [line for line in _warnings(err) if "Legacy workspace setup state" in line]
    assert "configs/agents/basic_agent/agent.yaml: workspace/.openclaw/workspace-state.json" in line, line
