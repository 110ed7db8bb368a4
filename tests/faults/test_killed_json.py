"""A SIGKILLed build's spending in `--output json`: `claw report`, `claw status` and `claw build` carry
`killed_builds` (its id, the nodes its log recorded, its cost: `cost_usd` null, never known, `known_cost_usd` what its
log counted, null when nothing is known), the builds their text names on stderr; before session 73 the JSON said
nothing of them and a script reading it never learned that money went to a build that never finished (real `claw`
build killed by SIGKILL, the stand-in server; the commands after it in the test's own process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import CLAW
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, many_cases

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def _built_then_killed(tmp_path: Path, standin: StandIn, reply: dict[str, Any], after_s: float) -> tuple[Workspace,
                                                                                                        str]:
    """A campaign built (its head there), then rebuilt with --force and SIGKILLed `after_s` after its first request;
    the killed build's id."""
    ws: Workspace = many_cases(tmp_path / "ws", 12, concurrency=2)
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    standin.set_default(reply)
    sent = len(standin.requests)
    build = subprocess.Popen([CLAW, "build", *CAMPAIGN, "--force"], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(standin.requests) == sent and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(after_s)
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    [journal] = [p for p in Path(os.environ["CLAW_STORE"]).rglob("*.jsonl") if p.parent.name == "builds"]
    return ws, journal.stem


def _killed_json(ws: Workspace, *command: str) -> list[dict[str, Any]]:
    done = run_here(ws.root, *command, *CAMPAIGN, "--output", "json")
    assert done.code == 0 and "Traceback" not in done.stderr, done
    assert ("was killed before it finished" in done.stderr) == bool(json.loads(done.stdout)["killed_builds"]), done
    killed: list[dict[str, Any]] = json.loads(done.stdout)["killed_builds"]
    return killed


def test_a_killed_build_that_spent_money_is_in_the_json_of_report_status_and_build(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    ws, killed_id = _built_then_killed(tmp_path, standin, text("four", latency=0.3), after_s=2.5)
    for command in (("report", "--no-chart"), ("status",)):
        [killed] = _killed_json(ws, *command)
        assert killed["build_id"] == killed_id and killed["nodes"] >= 1, (command, killed)
        assert killed["cost_usd"] is None and killed["known_cost_usd"] > 0, (command, killed)
        assert killed["cost_sources"].get("reported", 0) >= 1, (command, killed)

    standin.set_default(text("four"))
    [named] = _killed_json(ws, "build")  # (the build that found it killed names it, and it is named no more)
    assert named["build_id"] == killed_id and named["known_cost_usd"] > 0, named
    assert _killed_json(ws, "status") == [] and _killed_json(ws, "report", "--no-chart") == []


def test_a_killed_build_of_which_nothing_is_known_is_null_in_the_json_never_0(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    """Killed with its first requests in flight: nothing known of what it paid, `known_cost_usd` null (the text says
    'an unknown amount')."""
    ws, killed_id = _built_then_killed(tmp_path, standin, text("four", latency=30), after_s=0.3)
    for command in (("report", "--no-chart"), ("status",)):
        [killed] = _killed_json(ws, *command)
        assert killed == {"build_id": killed_id, "nodes": 0, "cost_usd": None, "known_cost_usd": None,
                          "cost_sources": {}}, (command, killed)


def test_build_dry_run_names_a_killed_build_in_its_text_and_json_and_tells_nobody(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    """`claw build --dry-run` says what a build would do: that money went to a build that never finished too, as
    `status`, `report` and a real build say it (text: the note on stderr; JSON: `killed_builds`). Before session 74 it
    said nothing of it. It tells no build of it (a dry run is no build that ended): `status` still names it."""
    ws, killed_id = _built_then_killed(tmp_path, standin, text("four", latency=0.3), after_s=2.5)
    text_run = run_here(ws.root, "build", "--dry-run", *CAMPAIGN)
    assert text_run.code == 0 and "Traceback" not in text_run.stderr, text_run
    assert f"build {killed_id} of this campaign was killed before it finished" in text_run.stderr, text_run
    [killed] = _killed_json(ws, "build", "--dry-run")
    assert killed["build_id"] == killed_id and killed["nodes"] >= 1, killed
    assert killed["cost_usd"] is None and killed["known_cost_usd"] > 0, killed
    [still] = _killed_json(ws, "status")
    assert still == killed
