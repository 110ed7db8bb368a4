"""`status`, `explain`, `build --dry-run` and `plan` without a matching stamp plan a window of cases at a time
(builder/api.py `inspect_windows`) and print in the whole campaign's order (builder/inorder.py): the same bytes as the
campaign planned in one window, and a peak that does not grow with the campaign.

Real in-process `claw` commands on a workspace built against the stand-in provider; the stamps are removed so that
every command plans.
"""

from __future__ import annotations

import json
import random
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import api
from clawstore.builder.api import CampaignRequest
from clawstore.builder.buildlog import head_ref
from clawstore.builder.stamp import STAMPS_DIR
from clawstore.graph import plan as graph_plan
from clawstore.project.front import Project
from clawstore.store.store import Store
from clawstore.testing.standin import StandIn, error, text
from tests.support.claw import Claw
from tests.support.fresh import measured_in_fresh_process
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.stamps import stampless_answers
from tests.support.workspace import SECRET, Workspace, many_cases

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
MODELS = ["m1", "m2", "m3"]
SMALL = 24  # cases of the smaller campaign (the larger: five times as many)
BOUND = 3 * 2**19  # what the larger's peak may exceed the smaller's by: its head's largest part (headdoc.PART_MAX)
COMMANDS = [("status",), ("explain",), ("build", "--dry-run"), ("plan",)]


def _campaign(ws: Workspace, standin: StandIn, cases: int) -> None:
    """`cases` cases × three models × two repetitions, judged three times each; replies of varied length (and so
    varied costs and estimates, whose sums depend on the order they are added in); m2's runs of c07 fail."""
    rng = random.Random(5)
    for index in range(cases):
        ws.case(f"c{index:02d}", f"Question {index}: " + "word " * rng.randint(1, 40))
    ws.suite("main", MODELS)
    ws.run_profile(repetitions=2, concurrency=4)
    eval_profile(ws)
    standin.script("vendor/m2", error(400, "refused"), match="Question 7:")  # (first: the first rule that fits answers)
    for model in MODELS:
        standin.script(f"vendor/{model}", *[text("answer " * rng.randint(1, 30)) for _ in range(400)])
    standin.script(JUDGE, *[judge_reply(rng.choice([4.0, 6.5, 7.0, 9.0])) for _ in range(2000)])


def _answers(claw: Claw, store: Path, window: int, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, str]]:
    """Every command's (exit code, stdout, stderr), text and JSON, planned `window` runs at a time."""
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", window)
    return stampless_answers(claw, store, COMMANDS, CAMPAIGN)


def _same_in_windows(claw: Claw, store: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, str]]:
    whole = _answers(claw, store, api.WHOLE, monkeypatch)
    windowed = _answers(claw, store, 1, monkeypatch)  # a case a window
    for (command, output), one, many in zip([(c, o) for c in COMMANDS for o in ("text", "json")], whole, windowed,
                                            strict=True):
        assert many == one, (command, output)
    return whole


def test_read_commands_planned_a_window_at_a_time_print_what_the_whole_campaign_prints(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    _campaign(ws, standin, 9)
    code, _, err = claw.build(*CAMPAIGN[4:], "--output", "json")
    assert code == 1, err  # (m2's runs of c07 failed: retried by the next build)
    built = _same_in_windows(claw, store, monkeypatch)
    assert built[2][1].startswith("run m2 c07 rep 0 (failed):"), built[2][1]
    # Stale in the ways a read command tells apart: an edited case (its runs and all they feed), a new case and a
    # new model (never built), beside the failed runs.
    ws.edit("cases/c03/test.yaml", lambda doc: doc["input"]["messages"][1].update(content="Edited question?"))
    ws.case("c99", "A new case?")
    ws.suite("main", [*MODELS, "m4"])
    stale = _same_in_windows(claw, store, monkeypatch)
    status, explain, plan_json = stale[0][1], stale[2][1], json.loads(stale[7][1])
    assert "m2     run     18     2      2       2" in status and "m4     judge   0      0      0       72" in status
    assert all(f in explain for f in ("run m1 c03 rep 1 (stale)", "run m4 c99 rep 0 (never-built)", "(failed)"))
    assert plan_json["requests"] == 38 + 114 and json.loads(stale[5][1])["would_execute"]["runs"] == 38
    # No head (its ref gone): every node planned from the action cache alone.
    with Store(store) as opened:
        opened.delete_ref(head_ref("main__rp__ev"))
    headless = _same_in_windows(claw, store, monkeypatch)
    assert headless != stale and "m2     run     18     0      2       4" in headless[0][1], headless[0][1]


def _status_peak(root: Path, store: Path) -> int:
    """Peak Python allocations of a `claw status` of the workspace at `root` that no stamp answers (the second: what
    the first imported, and the store's index it listed, are not the plan's), measured in a new interpreter: in a test
    worker, what earlier tests left (their threads, their garbage's finalizers) is counted too (a CI run once saw
    5.44 MiB at 120 cases where 1.77 is measured alone)."""
    return int(measured_in_fresh_process(status_peak_alone, root, store))


def status_peak_alone(root: str, store: str) -> int:
    """_status_peak's measurement, in the interpreter that runs it: planned 4 cases a window, as the test's."""
    graph_plan.WINDOW_RUNS = 8
    return _status_peak_here(Path(root), Path(store))


def _status_peak_here(root: Path, store: Path) -> int:
    project = Project(None, lambda line: None, CampaignRequest(root, "main", "rp", "ev"))
    shutil.rmtree(store / STAMPS_DIR, ignore_errors=True)
    project.status()
    shutil.rmtree(store / STAMPS_DIR, ignore_errors=True)
    tracemalloc.start()
    try:
        status = project.status()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        project.close()
    assert sum(n["fresh"] for kinds in status.per_model.values() for n in kinds.values()) == len(list(
        (root / "configs" / "cases").iterdir())) * 2 * 4  # (every node fresh: 2 models, 4 nodes a run)
    return peak


def small_and_large_peaks(tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch,
                          peak: Callable[[Path, Path], int]) -> tuple[int, int]:
    """`peak(workspace root, store)` of a campaign of SMALL cases and of one five times as large (two models, judged
    once), each built first against the stand-in, planned 4 cases a window."""
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", 8)  # 4 cases a window
    standin.script(JUDGE, judge_reply(7.0))
    peaks = []
    for cases in (SMALL, 5 * SMALL):
        ws = many_cases(tmp_path / f"ws{cases}", cases)
        eval_profile(ws, repetitions=1)
        monkeypatch.chdir(ws.root)
        store = ws.root / "store"
        monkeypatch.setenv("CLAW_STORE", str(store))
        code, _, err = Claw(ws.root).build(*CAMPAIGN[4:], "--output", "json")
        assert code == 0, err
        peaks.append(peak(ws.root, store))
    print(f"peak: {SMALL} cases {peaks[0] / 2**20:.2f} MiB, {5 * SMALL} cases {peaks[1] / 2**20:.2f} MiB")
    return peaks[0], peaks[1]


def test_status_without_a_stamp_holds_a_window_not_the_campaign(
        tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = small_and_large_peaks(tmp_path, standin, monkeypatch, _status_peak)
    assert large < small + BOUND, (small, large)


def _reorder_head(store: Path, campaign_id: str) -> None:
    """Write the campaign's head again with its parts in reverse case order (a head no build writes)."""
    with Store(store) as opened:
        ref = head_ref(campaign_id)
        doc = opened.get_json(opened.get_ref(ref))
        parts = [opened.get_json(part) for part in doc["node_parts"]]
        actions = [action for action, count in doc["node_actions"] for _ in range(count)]
        nodes = [(node, actions.pop(0)) for part in parts for node in part["nodes"]]
        nodes.sort(key=lambda pair: pair[0]["address"]["case_id"], reverse=True)
        part_ids = [opened.put_json({"head_part": 1, "nodes": [node for node, _ in nodes[at:at + 5]]})
                    for at in range(0, len(nodes), 5)]
        head = {**doc, "node_parts": part_ids, "node_actions": [[action, 1] for _, action in nodes]}
        opened.set_ref(ref, opened.put_json(head))


def test_a_head_out_of_case_order_is_read_whole_and_answers_the_same(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    _campaign(ws, standin, 8)
    code, _, err = claw.build(*CAMPAIGN[4:], "--output", "json")
    assert code == 1, err
    ws.edit("cases/c02/test.yaml", lambda doc: doc["input"]["messages"][1].update(content="Edited question?"))
    in_order = _answers(claw, store, 1, monkeypatch)
    whole_heads: list[bool] = []
    inspect_windows = api.inspect_windows

    def inspecting(*args: Any, whole_head: bool = False, **kwargs: Any) -> Any:
        whole_heads.append(whole_head)
        return inspect_windows(*args, whole_head=whole_head, **kwargs)

    monkeypatch.setattr(api, "inspect_windows", inspecting)
    _reorder_head(store, "main__rp__ev")
    assert _answers(claw, store, 1, monkeypatch) == in_order
    assert whole_heads == [False, True] * len(in_order)  # (each command streamed it, then read it whole)
