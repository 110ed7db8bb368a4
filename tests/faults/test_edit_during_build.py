"""A config edited while a build runs (a real `claw build` process, the stand-in's answers held): the build ran what it
read, so the stamp it leaves must not vouch for the file as it is now. Session 74's races audit: the stamp took the
stat data of the files the build read when it was written, at the build's end, so an edit made meanwhile (more than
the 2 s the stamp's racy check looks back) was recorded as seen, and the next `claw build` answered from the stamp
without running the edit."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn, held
from tests.hostile.attack import CLAW
from tests.support.claw import env, requests_sent  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def _prompt(ws: Workspace) -> None:
    ws.case("alpha", "What is 3 + 3?")


def _case(ws: Workspace) -> None:
    ws.case("gamma", "The gamma question?")


@pytest.mark.parametrize("edit", [_prompt, _case], ids=["prompt", "new case"])
def test_an_edit_during_a_build_is_built_by_the_next(tmp_path: Path, standin: StandIn, env: dict[str, str],  # noqa: F811
                                                    edit: object) -> None:
    ws = standard(tmp_path / "ws")  # alpha, beta x m1, m2
    ws.run_profile(concurrency=4, defaults={"timeout_seconds": 60})
    os.utime(ws.configs / "run_profiles" / "rp.yaml", (time.time() - 10, time.time() - 10))  # (not racy)
    standin.set_default(held("answers"))
    build = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        requests_sent(standin, 4)  # planned: every config read
        assert callable(edit)
        edit(ws)
        time.sleep(2.2)  # (older than the stamp's racy window when the build ends)
    finally:
        standin.release("answers")
        out, err = build.communicate(timeout=60)
    assert build.returncode == 0, out + err

    again = run_here(ws.root, "build", *CAMPAIGN)
    assert again.code == 0, again
    asked = sorted(r["messages"][-1]["content"] for r in standin.requests[4:])
    expected = "What is 3 + 3?" if edit is _prompt else "The gamma question?"
    assert asked == [expected] * 2, (asked, again.stdout[-800:], again.stderr[-800:])
