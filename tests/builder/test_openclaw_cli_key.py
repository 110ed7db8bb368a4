"""Where the container CLI is installed is not what an OpenClaw run is: its key holds the engine's name (the basename
of the run profile's `openclaw.docker_cli`), not the path as written. Before session 77 it held the path, so a
colleague whose copy of a shared run profile said `/usr/bin/docker` for `docker`, or a path through `..`, ran (and
paid for) every OpenClaw run again, the image pinned by digest and the engine the same (docs/openclaw.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.builder.test_build_openclaw import docker, oc  # noqa: F401 - fixtures
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw
from tests.support.oldclaw import KEYED_WITH_CLI_AS_WRITTEN, old_claw, old_clawstore
from tests.support.workspace import Workspace


def _named(docker: FakeDocker, name: str) -> Path:  # noqa: F811
    """The fake CLI under `name`, beside it (a symlink: the same engine, another install)."""
    link = Path(docker.cli).with_name(name)
    if not link.exists():
        link.symlink_to(Path(docker.cli).name)
    return link


def _use_cli(ws: Workspace, cli: str) -> None:
    ws.edit("run_profiles/rp.yaml", lambda d: d["openclaw"].update(docker_cli=cli))


def _runs(claw: Claw) -> dict[str, int]:
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    done: dict[str, int] = {}
    for row in json.loads(out)["rows"]:
        done[row["run"]] = done.get(row["run"], 0) + 1
    return done


def test_the_same_engine_spelled_otherwise_runs_nothing_again(oc: Workspace, claw: Claw, docker: FakeDocker,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = _named(docker, "docker").parent
    _use_cli(oc, str(bindir / "docker"))
    assert _runs(claw) == {"exec": 4}
    started = len(docker.calls("run"))
    assert started == 8  # 4 runs × (validate + one turn)
    _use_cli(oc, f"{bindir}/../{bindir.name}/docker")  # the same file, through `..`
    assert _runs(claw) == {"reuse": 4}
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    _use_cli(oc, "docker")  # the bare name, found on PATH
    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and "docker_cli" not in out, out + err
    assert _runs(claw) == {"reuse": 4}
    assert len(docker.calls("run")) == started  # zero containers
    # the engine's kind stays in the key: podman may run a container otherwise
    _use_cli(oc, str(_named(docker, "podman")))
    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert "runner.docker_cli 'docker' -> 'podman'" in out, out + err
    assert _runs(claw) == {"exec": 4}


def test_a_store_built_by_a_claw_keying_the_cli_as_written_keeps_its_runs(
        oc: Workspace, claw: Claw, docker: FakeDocker, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    old = old_clawstore(tmp_path / "old", KEYED_WITH_CLI_AS_WRITTEN)
    bindir = _named(docker, "docker").parent
    _use_cli(oc, str(bindir / "docker"))
    built = old_claw(old, oc.root, "build", "--suite", "main", "--run-profile", "rp")
    assert built.returncode == 0, built.stdout + built.stderr
    started = len(docker.calls("run"))
    assert started == 8
    # m1 priced since: its runs have a legacy key too (graph/plan.py Node.legacy: the prices and the CLI as written),
    # under which nothing is, and which must not hide the earlier one (the CLI as written, no prices)
    prices: dict[str, Any] = {"m1": {"pricing": {"input": 3.0, "output": 15.0}}, "m2": {}}
    oc.edit("suites/main.yaml", lambda d: [m.update(prices[m["model_id"]]) for m in d["models"]])
    assert _runs(claw) == {"reuse": 4}
    assert len(docker.calls("run")) == started  # zero containers
    # recorded under the key now as well: the same engine spelled otherwise finds them there
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    _use_cli(oc, "docker")
    assert _runs(claw) == {"reuse": 4}
    assert len(docker.calls("run")) == started
