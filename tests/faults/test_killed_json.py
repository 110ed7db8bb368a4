"""A SIGKILLed build's spending in `--output json`: `claw report`, `claw status` and `claw build` carry
`killed_builds` (its id, the nodes its log recorded, its cost: `cost_usd` null, never known, `known_cost_usd` what its
log counted, null when nothing is known), the builds their text names on stderr; before session 73 the JSON said
nothing of them and a script reading it never learned that money went to a build that never finished (real `claw`
build killed by SIGKILL, the stand-in server; the commands after it in the test's own process)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawstore.spend.killed import KilledBuild
from clawstore.testing.standin import StandIn, text
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.killing import build_killed_when
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, many_cases

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


Ready = Callable[[list[dict[str, Any]], KilledBuild | None], bool]  # (requests sent, the log's summary) -> kill now?


def _built_then_killed(tmp_path: Path, standin: StandIn, reply: dict[str, Any], ready: Ready) -> tuple[Workspace, str]:
    """A campaign built (its head there), then rebuilt with --force and SIGKILLed once `ready` holds of the requests
    it sent and of what its log's summary counts (spend/killed.py as_logged: what `killed_builds` says of it
    then). Not after a fixed time: 2.5 s after its first request found nothing counted yet at load 11-14, and a line in
    its journal is not yet counted (the document counting it is written after it); the killed build's id."""
    ws: Workspace = many_cases(tmp_path / "ws", 12, concurrency=2)
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    standin.set_default(reply)
    sent = len(standin.requests)
    journal = build_killed_when(ws.root, [*CAMPAIGN, "--force"], lambda logged: ready(standin.requests[sent:], logged),
                                lambda: standin.requests[sent:])
    return ws, journal.stem


def _spent(requests: list[dict[str, Any]], logged: KilledBuild | None) -> bool:
    """Its log counts a node executed and what it cost (what the first test asserts of `killed_builds`)."""
    return logged is not None and logged.executed >= 1 and (logged.known_usd or 0) > 0


def _first_requests_in_flight(requests: list[dict[str, Any]], logged: KilledBuild | None) -> bool:
    """Its log written (before its first request) and its first two requests (its concurrency) sent, unanswered."""
    return logged is not None and len(requests) >= 2 and not any("answered_at" in r for r in requests)


def _killed_json(ws: Workspace, *command: str) -> list[dict[str, Any]]:
    done = run_here(ws.root, *command, *CAMPAIGN, "--output", "json")
    assert done.code == 0 and "Traceback" not in done.stderr, done
    assert ("was killed before it finished" in done.stderr) == bool(json.loads(done.stdout)["killed_builds"]), done
    killed: list[dict[str, Any]] = json.loads(done.stdout)["killed_builds"]
    return killed


def test_a_killed_build_that_spent_money_is_in_the_json_of_report_status_and_build(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    ws, killed_id = _built_then_killed(tmp_path, standin, text("four", latency=0.3), _spent)
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
    ws, killed_id = _built_then_killed(tmp_path, standin, text("four", latency=30), _first_requests_in_flight)
    for command in (("report", "--no-chart"), ("status",)):
        [killed] = _killed_json(ws, *command)
        assert killed == {"build_id": killed_id, "nodes": 0, "cost_usd": None, "known_cost_usd": None,
                          "cost_sources": {}}, (command, killed)


def test_build_dry_run_names_a_killed_build_in_its_text_and_json_and_tells_nobody(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    """`claw build --dry-run` says what a build would do: that money went to a build that never finished too, as
    `status`, `report` and a real build say it (text: the note on stderr; JSON: `killed_builds`). Before session 74 it
    said nothing of it. It tells no build of it (a dry run is no build that ended): `status` still names it."""
    ws, killed_id = _built_then_killed(tmp_path, standin, text("four", latency=0.3), _spent)
    text_run = run_here(ws.root, "build", "--dry-run", *CAMPAIGN)
    assert text_run.code == 0 and "Traceback" not in text_run.stderr, text_run
    assert f"build {killed_id} of this campaign was killed before it finished" in text_run.stderr, text_run
    [killed] = _killed_json(ws, "build", "--dry-run")
    assert killed["build_id"] == killed_id and killed["nodes"] >= 1, killed
    assert killed["cost_usd"] is None and killed["known_cost_usd"] > 0, killed
    [still] = _killed_json(ws, "status")
    assert still == killed
