"""What a loaded campaign holds (issue 54, flat memory): every case compactly (config/catalog.py `CaseEntry`), its
items made a window of cases at a time (config/campaign.py `CampaignItems`), so that loading a campaign twice the
size holds little more. tests/builder/test_build_memory.py measures a build from after loading: this measures
loading itself."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from clawstore.config import resolve_campaign
from clawstore.config.campaign import Campaign
from clawstore.config.catalog import LoadedCase
from clawstore.graph.plan import window_items
from tests.support.fresh import measured_in_fresh_process
from tests.support.workspace import Workspace

MODELS = 5
# Python bytes a loaded campaign of MODELS models holds per case (tracemalloc, the difference of a 40-case and a
# 200-case campaign). Measured 2026-12-02: 8.5 KB with every case held as pydantic models and an item per run; 0.9 KB
# with the compact cases and the items made a window at a time.
HELD_PER_CASE_BOUND = 2_500


def _workspace(root: Path, cases: int) -> Workspace:
    ws = Workspace(root)
    for index in range(cases):
        ws.case(f"c{index:04d}", f"Question number {index}: what is {index} + 1?",
                deterministic_checks=[{"check_id": "present", "declarative": {"kind": "final_response_present"}}])
    ws.suite("main", [f"m{index}" for index in range(MODELS)])
    ws.run_profile()
    return ws


# Measured in a fresh interpreter, as claw loads a campaign: a pytest worker's history does not count. In a worker
# that had run other tests CI twice read 25 KB a case against 0.9 (2026-12-05), once even counting only traces
# whose frames pass through this file; the cause was not found in that worker's state, so the failure message
# names the lines that allocated the most.
_THIS_LOAD = [tracemalloc.Filter(True, __file__, all_frames=True)]


def _held(snapshot: tracemalloc.Snapshot) -> int:
    return sum(stat.size for stat in snapshot.filter_traces(_THIS_LOAD).statistics("filename"))


def _held_once_loaded(root: Path) -> tuple[int, Campaign, tracemalloc.Snapshot]:
    gc.collect()
    before = _held(tracemalloc.take_snapshot())
    campaign = resolve_campaign(root, "main", "rp")
    gc.collect()
    after = tracemalloc.take_snapshot()
    return _held(after) - before, campaign, after


def _measure(warm: str, small_root: str, large_root: str) -> dict[str, object]:
    # Imports and caches of a first load (the config models' validators are built at their first validation: under
    # 64 traced frames that took ~25 s of CPU, not traced ~0.03 s), made before the tracing starts.
    resolve_campaign(Path(warm), "main", "rp")
    tracemalloc.start(64)  # (frames enough to find this module's call below a load)
    try:
        small, _, small_snapshot = _held_once_loaded(Path(small_root))
        large, campaign, large_snapshot = _held_once_loaded(Path(large_root))
    finally:
        tracemalloc.stop()
    grown = large_snapshot.filter_traces(_THIS_LOAD).compare_to(small_snapshot.filter_traces(_THIS_LOAD), "lineno")
    return {"small": small, "large": large, "items": len(campaign.items),
            "most": [str(stat) for stat in grown[:5]]}


def test_a_loaded_campaign_holds_little_per_case(tmp_path: Path) -> None:
    sizes = (40, 200)
    roots = [_workspace(tmp_path / f"ws{cases}", cases).root for cases in sizes]
    warm = _workspace(tmp_path / "warm", 3).root
    measured = measured_in_fresh_process(_measure, warm, *roots, timeout=120)
    assert measured["items"] == sizes[1] * MODELS
    per_case = (measured["large"] - measured["small"]) / (sizes[1] - sizes[0])
    assert per_case < HELD_PER_CASE_BOUND, (f"{per_case:.0f} bytes held per case; grew most:", measured["most"])


def test_the_items_are_made_a_window_at_a_time_and_equal_the_whole(tmp_path: Path) -> None:
    campaign = resolve_campaign(_workspace(tmp_path / "ws", 7).root, "main", "rp")
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, LoadedCase)]  # nothing made before it is asked for
    windows = list(window_items(campaign, 2 * MODELS, 1))  # two cases a window
    assert [len(w) for w in windows] == [2 * MODELS] * 3 + [MODELS]
    whole = list(campaign.items)
    assert [(i.model_id, i.case_id) for i in whole] == [(f"m{m}", f"c{c:04d}") for m in range(MODELS) for c in range(7)]
    windowed = sorted((item for window in windows for item in window), key=lambda i: (i.model_id, i.case_id))
    assert [(i.model_id, i.case_id, i.case.case, i.messages, i.settings) for i in windowed] == \
        [(i.model_id, i.case_id, i.case.case, i.messages, i.settings) for i in whole]
    assert campaign.items[-1].case_id == "c0006" and campaign.items[7].model_id == "m1"
    assert campaign.case_ids == [f"c{c:04d}" for c in range(7)] and len(campaign.model_ids) == MODELS
