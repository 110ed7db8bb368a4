"""The container engine's address (DOCKER_HOST) may carry a credential: none of it is stored or printed. The engine
is the real docker CLI where it matters what it prints (tests/openclaw/engine.py: CI installs it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.builder.test_build_openclaw import docker, oc  # noqa: F401 - fixtures, taken through `fake`
from tests.openclaw.conftest import FakeDocker
from tests.openclaw.engine import in_ci
from tests.support.claw import Claw
from tests.support.storefiles import places_holding
from tests.support.workspace import Workspace

PASSWORD = "engine-pass-0w9q"


@pytest.fixture
def real_cli(oc: Workspace, docker: FakeDocker) -> Workspace:  # noqa: F811 - the fixtures imported above
    """The openclaw workspace with its run profile naming the real docker CLI."""
    if shutil.which("docker") is None:
        if in_ci():
            pytest.fail("no docker CLI (CI=true: .ci/run installs docker.io)", pytrace=False)
        pytest.skip("no docker CLI")
    profile = oc.configs / "run_profiles" / "rp.yaml"
    profile.write_text(profile.read_text().replace(docker.cli, "docker"))
    return oc


def test_an_engine_address_the_cli_cannot_read_is_reported_without_its_password(
        real_cli: Workspace, claw: Claw, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """docker (28.2) quotes a DOCKER_HOST it cannot parse whole, `parse "tcp://u:p@[::1": missing ']' in host`: the
    run's error (`openclaw_engine_unavailable`) stored that, and the build printed it."""
    monkeypatch.setenv("DOCKER_HOST", f"tcp://ops7user:{PASSWORD}@[::1")
    code, out, err = claw.build("--model", "m1", "--case", "oc_a", "--output", "json", "--progress", "json")
    assert "openclaw_engine_unavailable" in out + err, out + err  # (what this is about: the engine's own words)
    assert PASSWORD not in out + err
    assert places_holding(Path(env["CLAW_STORE"]), PASSWORD) == []
    for command in (("report", "--suite", "main", "--run-profile", "rp"), ("status", "--suite", "main",
                                                                           "--run-profile", "rp")):
        code, out, err = claw(*command)
        assert PASSWORD not in out + err
