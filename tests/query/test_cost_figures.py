"""A cost claw sums itself is shown rounded to USD_DIGITS decimals (clawstore/values/costs.py `shown_usd`), in every
JSON and CSV it writes: three judgements of 0.1 USD each were shown as 0.30000000000000004, and the stand-in's
0.001156 × 3 + 0.00002 as 0.0034879999999999998 (session 77's newcomer, copying costs into a spreadsheet to check
an invoice). Records keep the provider's number; an unknown cost stays null."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from math import fsum
from typing import Any

from clawstore.testing.standin import StandIn, text
from clawstore.values.costs import USD_DIGITS
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.judging import DIMS, JUDGE, eval_profile
from tests.support.workspace import Workspace

JUDGE_COST = 0.1  # three of them: 0.1 + 0.1 + 0.1 == 0.30000000000000004 in floats
FLAGS = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


def _judge_reply() -> dict[str, Any]:
    body = {"summary": "fine", "overall": {"evidence": ["seen"], "score": 7.0},
            "dimensions": {d: {"evidence": ["seen"], "score": 7.0} for d in DIMS}}
    return text(json.dumps(body), usage={"cost": JUDGE_COST})


def _usd_figures(doc: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every value under a key that ends in `usd`, with where it is."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key.endswith("usd"):
                yield f"{path}.{key}", value
            yield from _usd_figures(value, f"{path}.{key}")
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _usd_figures(value, f"{path}[{i}]")


def _noisy(doc: Any) -> list[tuple[str, Any]]:
    return [(where, v) for where, v in _usd_figures(doc) if isinstance(v, float) and v != round(v, USD_DIGITS)]


def test_costs_claw_sums_are_shown_without_float_noise(ws: Workspace, claw: Claw, standin: StandIn) -> None:  # noqa: F811
    eval_profile(ws, repetitions=3)
    standin.script(JUDGE, *[_judge_reply() for _ in range(12)])
    code, out, err = claw("build", *FLAGS, "--output", "json")
    assert code == 0, err
    built = json.loads(out)
    assert 0.1 + 0.1 + 0.1 != 0.3  # (what the test is about: the sum is noisy unless shown rounded)
    assert not _noisy(built), _noisy(built)
    assert {row["eval_cost_usd"] for row in built["rows"]} == {0.3}, built["rows"]

    code, out, err = claw("report", *FLAGS, "--output", "json", "--no-chart")
    assert code == 0, err
    report = json.loads(out)
    assert not _noisy(report), _noisy(report)
    assert report["totals"]["eval_cost_usd"] == round(fsum([JUDGE_COST] * 12), USD_DIGITS) == 1.2
    assert report["totals"]["run_cost_usd"] is not None and report["totals"]["run_cost_usd"] > 0

    code, out, err = claw("build", *FLAGS, "--output", "json", "--progress", "json")
    assert code == 0, err
    totals = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert not _noisy(totals), _noisy(totals)

    code, out, err = claw("query", "history", "--format", "csv")  # (its total_cost_usd: a sum claw made)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4 and all(float(r["total_cost_usd"]) == round(float(r["total_cost_usd"]), USD_DIGITS)
                                  for r in rows), out
    assert all(len(r["total_cost_usd"].partition(".")[2]) <= USD_DIGITS for r in rows), out

    code, out, err = claw("query", "leaderboard", "--format", "csv")  # (before session 77: 5 decimals, 0.00000285
    assert code == 0, err                                             # a run from OpenRouter read 0.0)
    board = {row["model_id"]: row for row in csv.DictReader(io.StringIO(out))}
    assert {m["model_id"]: m["total_cost_usd"] for m in report["models"]} == {
        model: float(row["total_cost_usd"]) for model, row in board.items()}, (report["models"], out)

    # the views' columns that are sums claw made (results', builds'), as the history query shows them
    for sql in ("select eval_cost_usd, total_cost_usd from results", "select eval_cost_usd, total_cost_usd "
                "from result_history", "select cost_usd, cost_known_usd, results_cost_usd from builds"):
        code, out, err = claw("query", sql, "--format", "json")
        assert code == 0 and json.loads(out), (sql, out, err)
        assert not _noisy(json.loads(out)), (sql, _noisy(json.loads(out)))
    code, out, err = claw("query", "select distinct eval_cost_usd from results", "--format", "csv")
    assert code == 0 and out.splitlines() == ["eval_cost_usd", "0.3"], (out, err)

    # each record keeps the provider's number (what SQL the user writes sums is the user's)
    code, out, err = claw("query", "select distinct cost_usd from judgements", "--format", "json")
    assert code == 0 and json.loads(out) == [{"cost_usd": JUDGE_COST}], (out, err)
