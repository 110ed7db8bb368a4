"""A build goes a window of runs at a time (graph/plan.py WINDOW_RUNS): it prints the rows and counts, and leaves
the head, of a build in one window; a window's runs execute beside the judgements of the window before; a stop keeps
the later windows' runs from starting but not the judgements under way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import buildlog, engine
from clawstore.builder.buildlog import head_ref
from clawstore.graph import plan as graph_plan
from clawstore.graph.explain import read_head
from clawstore.graph.plan import Node
from clawstore.store.store import Store
from clawstore.testing.standin import StandIn, error, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace, many_cases

CASES = 7  # × 2 models × 2 repetitions: 28 runs; a window of 4 runs holds one case (4 windows of 2 cases, …)


def _workspace(root: Path, standin: StandIn) -> Workspace:
    ws = many_cases(root, CASES, concurrency=3)
    ws.run_profile(concurrency=3, repetitions=2)
    eval_profile(ws, repetitions=2)
    standin.script(JUDGE, *[judge_reply(7)] * 400)
    return ws


def _build(ws: Workspace, store: Path, monkeypatch: pytest.MonkeyPatch, window: int,
           *extra: str) -> tuple[int, dict[str, Any], str]:
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", window)
    monkeypatch.setenv("CLAW_STORE", str(store))
    monkeypatch.chdir(ws.root)
    code, out, err = Claw(ws.root).build("--evaluation-profile", "ev", "--output", "json", *extra)
    return code, json.loads(out), err


def _steady(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{name: value for name, value in row.items() if name != "latency_s"} for row in rows]


def _head(store: Path, campaign: str) -> dict[str, str | None]:
    """Each address with a record, and a run's key (a run's record names its build and times, and the evaluation's
    keys follow from it: not the same twice)."""
    _, nodes = read_head(Store(store), head_ref(campaign))
    return {address: node.key if node.kind == "run" else None for address, node in nodes.items() if node.record}


def test_a_windowed_build_shows_and_keeps_what_one_window_does(
        tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path / "ws", standin)
    whole = _build(ws, tmp_path / "whole", monkeypatch, 1 << 30)
    windowed = _build(ws, tmp_path / "windowed", monkeypatch, 4)
    assert whole[0] == windowed[0] == 0, (whole[2], windowed[2])
    assert len(whole[1]["rows"]) == CASES * 2 * 2
    assert _steady(windowed[1]["rows"]) == _steady(whole[1]["rows"])  # the same rows in the same order
    assert windowed[1]["counts"] == whole[1]["counts"] == {"executed": CASES * 4 * 5, "reused": 0, "failed": 0,
                                                           "skipped": 0}  # a run, its checks, 2 judgements, a result
    campaign = whole[1]["campaign"]
    assert _head(tmp_path / "windowed", campaign) == _head(tmp_path / "whole", campaign)
    assert len(_head(tmp_path / "whole", campaign)) == CASES * 4 * 5
    # The stamp it left answers the next build with the same rows.
    again = _build(ws, tmp_path / "windowed", monkeypatch, 4)
    assert again[0] == 0 and [r["run"] for r in again[1]["rows"]] == ["reuse"] * CASES * 4
    assert _steady(again[1]["rows"]) == _steady([{**r, "run": "reuse", "eval": "reuse"}
                                                 for r in whole[1]["rows"]])


def test_a_window_s_runs_execute_beside_the_judgements_of_the_window_before(
        tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path / "ws", standin)
    calls: list[list[str]] = []
    execute = engine.execute_nodes

    def recorded(session: Any, nodes: list[Node], *args: Any, **kwargs: Any) -> None:
        calls.append([n.kind for n in nodes])
        execute(session, nodes, *args, **kwargs)

    monkeypatch.setattr(engine, "execute_nodes", recorded)
    code, built, err = _build(ws, tmp_path / "store", monkeypatch, 8)
    assert code == 0, err
    # 4 windows of 2 cases (8 runs): the first runs alone, each next one beside the last one's 16 judgements, which
    # are listed first (the first to start where both may).
    assert [(kinds.count("judge"), kinds.count("run")) for kinds in calls] == [(0, 8), (16, 8), (16, 8), (16, 4),
                                                                               (8, 0)]
    assert all(kinds == sorted(kinds, key=lambda kind: kind != "judge") for kinds in calls)


def test_a_stop_skips_the_runs_of_later_windows_and_not_the_evaluation_of_what_ran(
        tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws = _workspace(tmp_path / "ws", standin)
    ws.run_profile(concurrency=1, repetitions=2, stop_on_runner_error=True, defaults={"retries": 0})
    standin.script("vendor/m1", text("4"), error(500))  # the first window's second run fails
    code, built, err = _build(ws, tmp_path / "store", monkeypatch, 4)  # a window a case
    assert code == 1, err
    rows = built["rows"]
    assert [(r["run"], r["eval"]) for r in rows if r["case_id"] == "c000"] == [
        ("exec", "exec"), ("fail", "fail"), ("skip", "skip"), ("skip", "skip")]  # m1 0, m1 1, m2 0, m2 1
    later = [r for r in rows if r["case_id"] != "c000"]
    assert len(later) == (CASES - 1) * 4 and {(r["run"], r["eval"]) for r in later} == {("skip", "skip")}
    assert built["counts"] == {"executed": 1 + 4, "failed": 1, "reused": 0, "skipped": 2 + len(later)}


def test_the_planned_addresses_are_those_of_the_campaign_s_nodes(
        tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path / "ws", standin)
    seen: list[engine.Planned] = []
    advance = buildlog.BuildLog.advance_head

    def advancing(self: buildlog.BuildLog, planned: Any, *args: Any) -> str:
        seen.append(planned)
        return advance(self, planned, *args)

    monkeypatch.setattr(buildlog.BuildLog, "advance_head", advancing)
    code, built, err = _build(ws, tmp_path / "store", monkeypatch, 8)
    assert code == 0, err
    [planned] = seen
    head = _head(tmp_path / "store", built["campaign"])
    assert sorted(planned) == sorted(head) and all(address in planned for address in head)
    assert len(head) == CASES * 4 * 5
    for other in ("run/m3/c000/0", "run/m1/c999/0", "run/m1/c000/2", "judge/m1/c000/0/other/0",
                  "judge/m1/c000/0/main/2", "checks/m1/c000/0/x", "run/m1/c000", 7):
        assert other not in planned


def _rows(count: int, evals: bool) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        row: dict[str, Any] = {"model_id": f"m{i % 3}", "case_id": f"case_{i:0{1 + i % 4}d}", "repetition": i % 11,
                               "run": ("exec", "reuse", "skip", "fail")[i % 4], "status": "success" if i % 5 else "ü",
                               "latency_s": None if i % 7 == 0 else i / 3, "cost_usd": None if i % 6 == 0 else i / 7,
                               "cost_source": "reported", "key": f"blake3:{i:064x}", "error": None}
        if evals and i % 9:
            row.update(eval="exec", score=None if i % 8 == 0 else i / 13, passed=True, eval_status="success",
                       eval_cost_usd=0.0, eval_error=None)
        rows.append(row)
    return rows


@pytest.mark.parametrize(("count", "evals"), [(0, False), (1, True), (2, True), (2_345, True), (1_000, False)])
def test_the_rows_are_printed_as_one_table_or_one_json_object_of_them_all(
        count: int, evals: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from clawstore.cli import build_view
    from clawstore.cli.common import format_table
    from clawstore.project.front import Built

    rows = _rows(count, evals)
    built = Built("campaign", "build", rows, {"executed": 1}, {"cost_usd": 0.5}, [("run/m/c/0", "why")])
    build_view.print_built(built, "json")
    assert capsys.readouterr().out == json.dumps(
        {"campaign": "campaign", "build_id": "build", "rows": rows, "counts": {"executed": 1},
         "metrics": {"cost_usd": 0.5, "cost_known_usd": 0.5}, "failures": [{"node": "run/m/c/0", "reason": "why"}],
         "stopped": None, "exit_code": 0, "pending_in_batches": 0, "killed_builds": [], "warnings": []},
        sort_keys=True) + "\n"
    build_view.print_built(built, "text")
    table = capsys.readouterr().out.split("\n\nbuild build")[0]
    evaluated = any("eval" in row for row in rows)
    headers = ["MODEL", "CASE", "REP", "RUN", "STATUS", "LATENCY_S", "COST"] + (["EVAL", "SCORE"] if evaluated else [])
    cells = []
    for row in rows:  # (the table as `claw build` printed it before its rows were streamed)
        line = [row["model_id"], row["case_id"], str(row["repetition"]), row["run"], row["status"],
                "-" if row["latency_s"] is None else f"{row['latency_s']:.2f}", build_view._money(row)]
        if evaluated:
            line += [row.get("eval") or "-", "-" if row.get("score") is None else f"{row['score']:.2f}"]
        cells.append(line)
    assert table == format_table(headers, cells)
