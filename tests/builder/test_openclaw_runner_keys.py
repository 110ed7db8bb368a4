"""Runner settings an OpenClaw run never reads (a case's `runner: {type: openclaw, temperature: 0}`, a run profile's
`runner_defaults` and `model_overrides`, which only llm_probe merges): the schema allows them, so claw takes the
config, and says in one warning line per field, at `claw validate` and before a build runs anything, that the
openclaw runner does not read it. Before session 73 the runs were paid for without a word, with settings the user
believed applied."""

from __future__ import annotations

from typing import Any

from tests.builder.test_build_openclaw import docker, oc  # noqa: F401 - fixtures
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw
from tests.support.workspace import Workspace

CASE = "configs/cases/oc_a/test.yaml"
PROFILE = "configs/run_profiles/rp.yaml"


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def _settings(workspace: Workspace) -> None:
    def case(doc: dict[str, Any]) -> None:
        doc["runner"].update(temperature=0, max_tokens=64)

    def profile(doc: dict[str, Any]) -> None:
        doc.update(runner_defaults={"seed": 7}, model_overrides={"m1": {"top_p": 0.5}})

    workspace.edit("cases/oc_a/test.yaml", case)
    workspace.edit("run_profiles/rp.yaml", profile)


def test_validate_names_each_setting_the_openclaw_runner_does_not_read(oc: Workspace, claw: Claw) -> None:  # noqa: F811
    _settings(oc)
    code, out, err = claw("validate")
    assert code == 0 and out.startswith("OK:"), out + err
    said = _warnings(err)
    for where in (f"{CASE}: runner.temperature", f"{CASE}: runner.max_tokens", f"{PROFILE}: runner_defaults.seed",
                  f"{PROFILE}: model_overrides.m1.top_p"):
        assert [line for line in said if line.startswith(f"warning: {where}: ")
                and "the openclaw runner does not read it" in line], (where, said)
    assert not [line for line in said if "oc_b" in line], said  # (a case without settings: nothing to say)


def test_a_build_says_so_before_its_first_container(oc: Workspace, claw: Claw, docker: FakeDocker) -> None:  # noqa: F811
    _settings(oc)
    code, out, err = claw.build("--model", "m1", "--case", "oc_a")
    assert code == 0, out + err
    said = _warnings(err)
    assert any(line.startswith(f"warning: {CASE}: runner.temperature: ") for line in said), err
    assert any(line.startswith(f"warning: {PROFILE}: runner_defaults.seed: ") for line in said), err
    assert any(line.startswith(f"warning: {PROFILE}: model_overrides.m1.top_p: ") for line in said), err
    assert len(docker.calls("run")) == 2  # (and it ran: validate, one turn)


def test_settings_an_llm_probe_case_reads_are_not_warned_of(ws: Workspace, claw: Claw) -> None:
    """The standard llm_probe workspace: runner_defaults in its run profile, settings on its cases."""
    ws.edit("cases/" + next(p.name for p in (ws.configs / "cases").iterdir()) + "/test.yaml",
            lambda doc: doc["runner"].update(temperature=0.5))
    code, out, err = claw("validate")
    assert code == 0 and _warnings(err) == [], out + err
