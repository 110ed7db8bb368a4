"""A build whose OpenClaw runs the container engine cannot start (no engine in this shell, the daemon down, the image
not loaded) is refused before anything runs: one line, exit 2, no head and no build log. Before session 80 each run
failed `openclaw_engine_unavailable` and that failed build became the campaign's head (`claw report`, `claw view`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from clawstore.builder.buildlog import head_ref
from clawstore.store import Store
from clawstore.store.buildlogs import builds_dir
from clawstore.testing.standin import StandIn
from tests.builder.test_build_openclaw import docker, oc, oc_cli, rows  # noqa: F401 - fixtures
from tests.openclaw.conftest import FAKE_IMAGE, FakeDocker
from tests.support.claw import Claw
from tests.support.workspace import Workspace

CAMPAIGN = "main__rp__none"
NO_DAEMON = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")


def _store() -> Store:
    return Store(Path(os.environ["CLAW_STORE"]))


def _built(store: Store) -> tuple[str | None, list[str]]:
    """The campaign's head and the build logs in the store."""
    logs = builds_dir(store.root)
    return store.get_ref(head_ref(CAMPAIGN)), sorted(p.name for p in logs.iterdir()) if logs.exists() else []


def _refusal(out: str, err: str) -> str:
    """The one line a refused build prints (no traceback, nothing on stdout)."""
    assert "Traceback" not in out + err and out == "", out + err
    [line] = err.splitlines()
    assert line.startswith("claw: error: configs/run_profiles/rp.yaml: openclaw.image: "), line
    return line


def _no_daemon(ws: Workspace, tmp_path: Path) -> None:
    """The run profile's CLI answers as docker does with no daemon."""
    cli = tmp_path / "bin" / "no-daemon"
    cli.write_text(f"#!/bin/sh\necho '{NO_DAEMON}' >&2\nexit 1\n")
    cli.chmod(0o755)
    profile = ws.configs / "run_profiles" / "rp.yaml"
    profile.write_text(profile.read_text().replace(oc_cli(profile), str(cli)))


def test_a_build_where_the_engine_lacks_the_image_is_refused_and_leaves_the_head(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811 - the fixtures imported above
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    store = _store()
    before, runs, asked = _built(store), len(docker.calls("run")), len(standin.requests)
    docker.script(images={})  # the engine answers, without the image (another engine, the image removed)
    _, status_before, _ = claw("status", "--suite", "main", "--run-profile", "rp")
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")  # a real claw process
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, out + err
    line = _refusal(out, err)
    assert f"image '{FAKE_IMAGE}' is not present in the engine" in line, line  # the engine's problem
    assert "load the image" in line and "DOCKER_HOST" in line, line  # the fix
    assert _built(store) == before  # no head, no build log
    assert len(docker.calls("run")) == runs and len(standin.requests) == asked  # nothing started, nothing sent
    _, status_after, _ = claw("status", "--suite", "main", "--run-profile", "rp")
    assert status_after == status_before
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0 and "openclaw_engine_unavailable" not in out + err, out + err
    docker.script()  # the image back: the stored runs are reused
    code, out, err = claw.build("--output", "json")
    assert code == 0 and {r["run"] for r in rows(out).values()} == {"reuse"}, out + err


def test_a_build_with_the_daemon_down_and_no_store_yet_makes_none(
        oc: Workspace, claw: Claw, tmp_path: Path) -> None:  # noqa: F811 - the fixture imported above
    _no_daemon(oc, tmp_path)
    code, out, err = claw.build()
    assert code == 2, out + err
    line = _refusal(out, err)
    assert f"container engine unavailable: {NO_DAEMON}" in line and "start the engine" in line.lower(), line
    assert not Path(os.environ["CLAW_STORE"]).exists()  # (as a missing key: a refused build leaves no store)


def test_a_mixed_campaign_is_refused_whole_and_its_other_cases_build_alone(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811 - the fixtures imported above
    oc.case("alpha", "What is 2 + 2?")  # an llm_probe case beside the OpenClaw ones
    code, out, err = claw.build("--case", "oc_a")
    assert code == 0, out + err  # (the store made: the refusal below is the planned one, not the no-store one)
    asked = len(standin.requests)
    docker.script(images={})
    code, out, err = claw.build()
    assert code == 2, out + err
    _refusal(out, err)
    assert len(standin.requests) == asked  # alpha's runs were not sent either
    code, out, err = claw.build("--case", "alpha", "--output", "json")
    assert code == 0 and {r["run"] for r in rows(out).values()} == {"exec"}, out + err


def test_the_dry_run_lists_the_runs_and_warns_the_build_would_be_refused(
        oc: Workspace, claw: Claw, docker: FakeDocker) -> None:  # noqa: F811 - the fixtures imported above
    code, out, err = claw.build()
    assert code == 0, out + err
    docker.script(images={})
    code, out, err = claw.build("--dry-run", "--output", "json")
    assert code == 0, out + err
    plan = json.loads(out)
    assert {n["state"] for n in plan["nodes"] if n["kind"] == "run"} == {"stale"}, out  # (keyed with no digest)
    warnings = [line for line in err.splitlines() if "would be refused" in line]
    assert len(warnings) == 1 and f"image '{FAKE_IMAGE}' is not present" in warnings[0], err
    for command in ("status", "explain", "plan"):  # they say STALE, and refuse nothing
        code, out, err = claw(command, "--suite", "main", "--run-profile", "rp")
        assert code == 0, (command, out, err)

