"""A build that no stamp answers reads the campaign's head a window of cases at a time (builder/api.py
`_build_planned`, graph/explain.py `HeadByCases`): it holds a window's head nodes, not the campaign's, and plans,
reuses and writes exactly what a build holding the whole head did.

Real in-process `claw build`s of workspaces built against the stand-in provider; the stamps removed before each.
"""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import buildlog
from clawstore.builder.api import CampaignRequest
from clawstore.builder.buildlog import head_ref
from clawstore.builder.stamp import STAMPS_DIR
from clawstore.graph import plan as graph_plan
from clawstore.project.front import BuildSettings, Project
from clawstore.store import headdoc
from clawstore.store.core import index, runtime
from clawstore.store.headdoc import read_head_doc, write_head
from clawstore.store.store import Store
from clawstore.testing.standin import StandIn
from tests.builder.test_stampless_windows import CAMPAIGN, _campaign, _reorder_head, small_and_large_peaks
from tests.support.claw import Claw
from tests.support.fresh import measured_in_fresh_process
from tests.support.storefiles import lose_object
from tests.support.workspace import Workspace

BOUND = 2**19  # what the larger campaign's build may peak above the smaller's (its head read whole: 2 MB more)


def _build_peak(root: Path, store: Path) -> int:
    """Peak Python allocations of a `claw build` (every node fresh) of the workspace at `root` that no stamp answers
    (the second: what the first imported, and the store's index it listed, are not the build's), measured in a new
    interpreter (tests/support/fresh.py: a test worker's leftovers are counted too)."""
    return int(measured_in_fresh_process(build_peak_alone, root, store))


def _small_buffers(patch: pytest.MonkeyPatch) -> None:
    """The build's other constant buffers made small, so that this campaign outgrows them as a big one does theirs:
    the build log's sorted runs (spilled past 16 KiB, 4 merged at once), a head part (read whole: at most 32 nodes),
    the index's segments held as dicts and the open pack; 4 cases a window."""
    patch.setattr(buildlog, "SPILL_RUN_BYTES", 16 << 10)
    patch.setattr(buildlog, "SPILL_FAN_IN", 4)
    patch.setattr(headdoc, "PART_MAX", 32)
    patch.setattr(index, "SMALL_ROWS", 64)
    patch.setattr(runtime, "PACK_TARGET", 64 << 10)
    patch.setattr(graph_plan, "WINDOW_RUNS", 8)


def build_peak_alone(root: str, store: str) -> int:
    """_build_peak's measurement, in the interpreter that runs it, with the test's small buffers."""
    with pytest.MonkeyPatch.context() as patch:
        _small_buffers(patch)
        return _build_peak_here(Path(root), Path(store))


def _build_peak_here(root: Path, store: Path) -> int:
    project = Project(None, lambda line: None, CampaignRequest(root, "main", "rp", "ev"))
    try:
        shutil.rmtree(store / STAMPS_DIR, ignore_errors=True)
        project.build(BuildSettings(quiet=True, progress="none"))
        shutil.rmtree(store / STAMPS_DIR, ignore_errors=True)
        tracemalloc.start()
        try:
            built = project.build(BuildSettings(quiet=True, progress="none"))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        project.close()
    assert built.counts["executed"] == 0 and built.counts["reused"] > 0, built.counts
    return peak


@pytest.mark.timeout(120)
def test_a_build_no_stamp_answers_holds_a_window_of_its_head_not_the_campaign(
        tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    _small_buffers(monkeypatch)  # (the builds too: tests/builder/test_build_memory.py)
    small, large = small_and_large_peaks(tmp_path, standin, monkeypatch, _build_peak)
    assert large < small + BOUND, (small, large)


def _stampless_build(claw: Claw, store: Path) -> tuple[int, dict[str, Any], str]:
    shutil.rmtree(store / STAMPS_DIR, ignore_errors=True)
    code, out, err = claw.build(*CAMPAIGN[4:], "--output", "json")
    return code, json.loads(out) if out.strip() else {}, err


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in report.items() if name not in ("build_id", "duration_s")}


def test_a_windowed_build_writes_the_head_a_whole_head_build_writes(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An edited case, a new one and failed runs retried, built a case a window and in one window from copies of the
    same store: the same report, the same head; then a head out of case order is read whole and nothing is paid
    again; then a head with a part missing is one line naming the ref before anything is sent."""
    store = Path(env["CLAW_STORE"])
    _campaign(ws, standin, 8)
    assert claw.build(*CAMPAIGN[4:], "--output", "json")[0] == 1  # (m2's runs of c07 failed)
    ws.edit("cases/c02/test.yaml", lambda doc: doc["input"]["messages"][1].update(content="Edited question?"))
    ws.case("c99", "A new case?")
    heads = {}
    reports = {}
    for window in (graph_plan.WINDOW_RUNS, 1):
        copy = store.parent / f"store-{window}"
        shutil.copytree(store, copy)
        monkeypatch.setenv("CLAW_STORE", str(copy))
        monkeypatch.setattr(graph_plan, "WINDOW_RUNS", window)
        sent = len(standin.requests)
        code, report, err = _stampless_build(claw, copy)
        assert code == 1 and report["counts"]["executed"] > 0, err
        reports[window] = (_comparable(report), len(standin.requests) - sent)
        with Store(copy) as opened:
            heads[window] = opened.get_ref(head_ref("main__rp__ev"))
    assert reports[1] == reports[graph_plan.WINDOW_RUNS] and heads[1] == heads[graph_plan.WINDOW_RUNS], reports

    copy = store.parent / "store-1"
    _reorder_head(copy, "main__rp__ev")
    sent = len(standin.requests)
    code, report, err = _stampless_build(claw, copy)
    assert code == 1 and report["counts"] == {"executed": 0, "failed": 2, "reused": 384, "skipped": 0}, err
    assert len(standin.requests) == sent + 2  # (m2's runs of c07, retried: nothing else sent again)

    # A node no build writes, of a case after every case of the campaign (no window asks for it): still typed
    # before the head is advanced, and said as one line.
    with Store(copy) as opened:
        ref = head_ref("main__rp__ev")
        doc = read_head_doc(opened, opened.get_ref(ref))
        damaged = [*doc["nodes"], {"kind": "run", "address": {"case_id": "zz", "model_id": "m1", "repetition": 0}}]
        opened.set_ref(ref, head := write_head(opened, headdoc.head_fields(doc), damaged))
    code, report, err = _stampless_build(claw, copy)
    assert code == 3 and err.count("\n") == 1 and f"points at {head}, which is damaged" in err, err
    with Store(copy) as opened:
        opened.set_ref(ref, write_head(opened, headdoc.head_fields(doc), doc["nodes"]))
        head = opened.get_ref(ref)
        lose_object(opened, opened.get_json(head)["node_parts"][-1])
    code, report, err = _stampless_build(claw, copy)
    assert code == 3 and err.count("\n") == 1 and f"points at {head}" in err and "claw fsck --repair" in err, err
    assert len(standin.requests) == sent + 2 + 2  # (the damaged head's build sent c07's again before it was found)
