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


def need_docker_cli() -> None:
    if shutil.which("docker") is None:
        if in_ci():
            pytest.fail("no docker CLI (CI=true: .ci/run installs docker.io)", pytrace=False)
        pytest.skip("no docker CLI")


@pytest.fixture
def real_cli(oc: Workspace, docker: FakeDocker) -> Workspace:  # noqa: F811 - the fixtures imported above
    """The openclaw workspace with its run profile naming the real docker CLI."""
    need_docker_cli()
    profile = oc.configs / "run_profiles" / "rp.yaml"
    profile.write_text(profile.read_text().replace(docker.cli, "docker"))
    return oc


def test_an_engine_address_the_cli_cannot_read_is_reported_without_its_password(
        real_cli: Workspace, claw: Claw, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """docker (28.2) quotes a DOCKER_HOST it cannot parse whole, `parse "tcp://u:p@[::1": missing ']' in host`: the
    build's refusal quotes it (before session 80 the run's error, `openclaw_engine_unavailable`, stored that, and the
    build printed it), and names the engine it asked, its password masked."""
    monkeypatch.setenv("DOCKER_HOST", f"tcp://ops7user:{PASSWORD}@[::1")
    code, out, err = claw.build("--model", "m1", "--case", "oc_a", "--output", "json", "--progress", "json")
    assert code == 2, out + err
    assert "missing ']'" in err and "DOCKER_HOST=tcp://***@[::1" in err, err  # the engine's own words, its address
    assert PASSWORD not in out + err
    assert places_holding(Path(env["CLAW_STORE"]), PASSWORD) == []
    for command in (("report", "--suite", "main", "--run-profile", "rp"), ("status", "--suite", "main",
                                                                           "--run-profile", "rp")):
        code, out, err = claw(*command)
        assert PASSWORD not in out + err


def test_gc_says_an_engine_did_not_answer_without_the_password_of_its_address(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record a killed build left, cleaned up where DOCKER_HOST is as the build had it: the engine is asked with
    the password (the record holds none), and docker's refusal quoting the address is shown masked."""
    need_docker_cli()
    from clawstore.runners.openclaw.container import EngineSettings
    from clawstore.runners.openclaw.orphans import owner_labels, stop_orphans
    from clawstore.store import Store

    monkeypatch.setenv("DOCKER_HOST", f"tcp://ops7user:{PASSWORD}@[::1")
    store = Store(tmp_path / "store")
    owner_labels(store, "20261207T000000-0badf00d", EngineSettings(docker_cli="docker"))
    report = stop_orphans(store)
    assert report.stopped == [] and len(report.unanswered) == 1
    assert "missing ']'" in report.unanswered[0] and "tcp://***@[::1" in report.unanswered[0], report.unanswered
    assert PASSWORD not in report.unanswered[0]
    assert places_holding(store.root, PASSWORD) == []
