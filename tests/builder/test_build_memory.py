"""What a build holds (issue 54, flat memory): a node's input document is dropped once its record is stored
or reused, so the Python memory a build keeps per run, measured by tracemalloc at the head's advance (where a
build holds the most), stays under a bound as the campaign grows."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from clawstore.builder import buildlog
from clawstore.builder.api import CampaignRequest, build
from clawstore.builder.engine import BuildOptions, BuildReport
from clawstore.graph.plan import Node
from clawstore.project.front import Project
from clawstore.testing.standin import StandIn
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import SECRET, Workspace, many_cases

# Python bytes a build of this campaign holds per run (4 nodes: run, checks, one judgement, result) at the head's
# advance, over and above a smaller build's. Measured: about 17 KB before input documents were released, under
# 13 KB after (docs/building.md, Memory: what a build holds).
HELD_PER_RUN_BOUND = 15_000


@pytest.fixture
def env(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.delenv("CLAW_STORE", raising=False)
    standin.set_default({"content": "4"})
    standin.script(JUDGE, judge_reply(7))


def _workspace(root: Path, cases: int) -> Workspace:
    ws = many_cases(root, cases, concurrency=4)
    eval_profile(ws, repetitions=1)
    return ws


def _build(ws: Workspace, said: list[str]) -> BuildReport:
    request = CampaignRequest(ws.root, "main", "rp", "ev")
    return build(request, Project(None, said.append, request), BuildOptions(progress="none"))


def _nodes(report: BuildReport) -> list[Node]:
    return [*report.runs, *(node for ev in report.evals for node in ev.nodes())]


def test_a_built_node_keeps_no_input_document(tmp_path: Path, env: None) -> None:
    ws = _workspace(tmp_path / "ws", 3)
    said: list[str] = []
    for action in ("exec", "reuse"):
        report = _build(ws, said)
        nodes = _nodes(report)
        assert len(nodes) == 3 * 2 * 4 and {n.action for n in nodes} == {action}, said
        assert [n for n in nodes if n.document or n.judge_requests] == []
        assert report.exit_code == 0


def _held_at_advance(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> int:
    """Python bytes traced when the build advances its head, over those traced before it started."""
    held: list[int] = []
    advance = buildlog.BuildLog.advance_head

    def measured(self: buildlog.BuildLog, *args: object, **kwargs: object) -> str:
        gc.collect()
        held.append(tracemalloc.get_traced_memory()[0])
        return advance(self, *args, **kwargs)

    monkeypatch.setattr(buildlog.BuildLog, "advance_head", measured)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert _build(ws, []).exit_code == 0
    finally:
        tracemalloc.stop()
    return held[0] - before


def test_what_a_build_holds_per_run_is_bounded(tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _held_at_advance(_workspace(tmp_path / "warm", 2), monkeypatch)  # imports and caches of a first build
    small = _held_at_advance(_workspace(tmp_path / "small", 20), monkeypatch)
    large = _held_at_advance(_workspace(tmp_path / "large", 80), monkeypatch)
    per_run = (large - small) / ((80 - 20) * 2)
    assert per_run < HELD_PER_RUN_BOUND, f"{per_run:.0f} bytes held per run"
