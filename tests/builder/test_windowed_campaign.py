"""A build makes its campaign's items a window of cases at a time (config/campaign.py `CampaignItems`), but every
case is validated when the campaign is loaded: a bad case in the last window fails the build before any request,
with the one line that names its file and field; and a build holds the cases of its windows, not the campaign's."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

from clawstore.builder import engine
from clawstore.builder.engine import BuildReport
from clawstore.config.catalog import LoadedCase
from clawstore.config.models import TestCase
from clawstore.graph import plan as graph_plan
from clawstore.graph.plan import Node
from clawstore.store.store import Store
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.workspace import Workspace

CASES = 30
WINDOW = 8  # runs a window: 4 cases of the 2 models


def _many(ws: Workspace) -> None:
    for index in range(CASES):
        ws.case(f"c{index:03d}", f"Question {index}?")


BAD_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a field the model refuses": (lambda doc: doc["expectations"]["hard_expectations"][0].update(txt="typo"),
                                  "expectations.hard_expectations[0]"),
    "a message source that is not there": (lambda doc: doc["input"]["messages"].append(
        {"role": "user", "source": "gone.yaml"}), "input.messages[2]"),
}


@pytest.mark.parametrize("bad", list(BAD_CASES))
def test_a_bad_case_in_the_last_window_fails_the_build_before_any_request(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", WINDOW)
    _many(ws)
    change, field = BAD_CASES[bad]
    ws.case("zz_last", "The last case?")
    ws.edit("cases/zz_last/test.yaml", change)
    code, out, err = claw.build()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "configs/cases/zz_last/test.yaml" in lines[0] and field in lines[0], err
    assert "Traceback" not in err and standin.requests == []


def test_a_build_holds_the_cases_of_its_windows(ws: Workspace, claw: Claw, standin: StandIn,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", WINDOW)
    _many(ws)  # 32 cases, 8 windows
    alive: list[tuple[int, int]] = []
    stores: list[Store] = []
    add_window, run_build = engine.BuildReport.add_window, engine.run_build

    def building(campaign: Any, store: Store, *args: Any, **kwargs: Any) -> BuildReport:
        stores.append(store)
        return run_build(campaign, store, *args, **kwargs)

    def counted(self: BuildReport, runs: list[Node], evaluations: Any) -> None:
        add_window(self, runs, evaluations)
        stores[0].flush()  # a window's nodes wait for their group commit (BuildLog.await_durable): not timing here
        gc.unfreeze()  # (what loading made is frozen out of the collector's sight: builder/cyclic_gc.py)
        gc.collect()
        objects = gc.get_objects()
        alive.append((sum(1 for o in objects if isinstance(o, LoadedCase)),
                      sum(1 for o in objects if isinstance(o, TestCase))))
        del objects
        gc.freeze()

    monkeypatch.setattr(engine, "run_build", building)
    monkeypatch.setattr(engine.BuildReport, "add_window", counted)
    code, out, err = claw.build()
    assert code == 0, (out, err)
    assert len(standin.requests) == 2 * (CASES + 2) and len(alive) == 8
    # The window's 4 cases and the next one's, being planned: never the campaign's 32.
    assert max(max(counts) for counts in alive) <= WINDOW, alive
