"""A build's full collections (builder/cyclic_gc.py): while its nodes execute, Python's cyclic collector makes a full
pass after FULL_EVERY generation-1 passes, not after ten, and the caller's thresholds are back once the build returns.
A full pass walks every live node and row of the build's windows (more of them the bigger the campaign) and found no
cycle to free in cold builds (docs/scale/building.md, Session 51)."""

from __future__ import annotations

import collections
import gc
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import cyclic_gc, engine
from clawstore.builder.api import CampaignRequest, build
from clawstore.builder.engine import BuildOptions
from clawstore.project.front import Project
from clawstore.testing.standin import StandIn
from tests.support.fresh import in_fresh_process
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import SECRET, many_cases

# Young thresholds small enough that a build of 40 runs makes many generation-1 passes (Python's: 700, 10); the third
# is Python's own ten, which the build is to replace while it executes.
THRESHOLDS = (60, 2, 10)


def test_full_collections_are_rare_while_a_build_executes(tmp_path: Path) -> None:
    # A new interpreter: whether a full pass runs also depends on how many objects outlived the last one (a full pass
    # waits until a quarter more have), which in a test worker is whatever earlier tests left.
    in_fresh_process(__name__, "_counted", tmp_path, timeout=120)


def _counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passes: collections.Counter[int] = collections.Counter()
    executing = [False]
    execute = engine._Windowed._execute

    def counted(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and executing[0]:
            passes[info["generation"]] += 1

    def timed(self: engine._Windowed, nodes: list[Any]) -> None:
        executing[0] = True
        try:
            execute(self, nodes)
        finally:
            executing[0] = False

    monkeypatch.setattr(engine._Windowed, "_execute", timed)
    with StandIn() as standin:
        standin.script(JUDGE, judge_reply(7))
        for key, value in {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
                           "CLAW_STORE": str(tmp_path / "store")}.items():
            monkeypatch.setenv(key, value)
        ws = many_cases(tmp_path / "ws", 20)
        eval_profile(ws, repetitions=1)
        request = CampaignRequest(ws.root, "main", "rp", "ev")
        gc.set_threshold(*THRESHOLDS)
        gc.callbacks.append(counted)
        try:
            report = build(request, Project(None, lambda _: None, request), BuildOptions(progress="none"))
        finally:
            gc.callbacks.remove(counted)
    assert report.exit_code == 0
    assert gc.get_threshold() == THRESHOLDS  # the caller's, once the build returns
    # At Python's ten, 1 full pass in 11 (mutant: without collect_fully_seldom, 8 or more here).
    assert passes[1] >= 3 * cyclic_gc.FULL_EVERY // 10, passes
    assert passes[2] <= passes[1] // cyclic_gc.FULL_EVERY + 1, passes
