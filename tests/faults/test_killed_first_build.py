"""A campaign's first build SIGKILLed after some runs answered and were stored, before it wrote its head: `claw status`
says so, with the count of finished nodes its table shows, which the next build reuses; not "has never been built"
beside a table of fresh nodes (before session 78: both true of the head and of the log, which is written every ~2 s,
and together read as paid work lost). `claw report` says the same, and names what the killed build spent (real `claw`
processes, the stand-in server, a real SIGKILL). `claw view` too (it said "no build recorded")."""

from __future__ import annotations

import json
import re
from pathlib import Path

from clawstore.spend.killed import KilledBuild
from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import run_claw
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.killing import build_killed_when
from tests.support.workspace import Workspace, many_cases

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def test_a_first_build_killed_before_its_head_says_what_it_kept(tmp_path: Path, standin: StandIn,
                                                                env: dict[str, str]) -> None:  # noqa: F811
    ws: Workspace = many_cases(tmp_path / "ws", 12, concurrency=2)
    standin.set_default(text("four", latency=0.2))
    store = Path(env["CLAW_STORE"])

    opened: list[Store] = []

    def stored(logged: KilledBuild | None) -> bool:  # (some runs answered and stored, whatever the log counts yet)
        if logged is None:
            return False
        opened[:] = opened or [Store(store)]
        return len(list(opened[0].iter_actions())) >= 3

    journal = build_killed_when(ws.root, list(CAMPAIGN), stored, lambda: len(standin.requests))
    status = run_claw(ws.root, "status", *CAMPAIGN)
    assert status.code == 0 and "Traceback" not in status.stderr, status
    fresh = sum(int(line.split()[2]) for line in status.stdout.splitlines()[2:] if line.split()[1] == "run")
    assert fresh >= 3, status.stdout
    assert "never been built" not in status.stderr, status.stderr
    [line] = [line for line in status.stderr.splitlines() if "before it wrote its head" in line]
    assert f"build {journal.stem} was killed before it wrote its head" in line, line
    assert re.search(rf"\b{fresh} finished run\(s\) are kept in the store", line), (fresh, line)
    assert "the next claw build reuses them" in line, line
    as_json = run_claw(ws.root, "status", *CAMPAIGN, "--output", "json")
    assert json.loads(as_json.stdout)["has_head"] is False, as_json.stdout

    report = run_claw(ws.root, "report", *CAMPAIGN, "--no-chart")
    assert report.code == 2 and "Traceback" not in report.stderr, report
    assert f"build {journal.stem} was killed before it wrote its head" in report.stderr, report.stderr
    assert "never been built" not in report.stderr and "was killed before it finished" in report.stderr, report
    page = run_claw(ws.root, "view", *CAMPAIGN, "--out", str(tmp_path / "view.html"))
    assert page.code == 2 and "Traceback" not in page.stderr, page
    assert f"build {journal.stem} was killed before it wrote its head" in page.stderr, page.stderr
    assert "no build recorded" not in page.stderr and "was killed before it finished" in page.stderr, page
