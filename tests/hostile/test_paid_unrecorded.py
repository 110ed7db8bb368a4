"""A paid answer whose record is refused (its metrics past a record's bounds) fails its node, and what it cost is
still counted: unknown (or the amount its answer reported), never 0 in the build line, its log or `claw query`'s
builds (real `claw` processes, the stand-in server)."""

from __future__ import annotations

import json

from clawstore.testing.standin import StandIn, text, tool_call
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

BUILD = ("build", "--suite", "main", "--run-profile", "rp")
# The most one reply may report, no cost: priced at the highest declared price, 2,000,000 USD a reply.
HUGE = {"prompt_tokens": 100_000_000, "completion_tokens": 100_000_000, "total_tokens": None, "cost": None}
TOP_PRICE = {"input": 10_000, "output": 10_000}


def huge_tool_loop(turns: int = 8) -> list[dict]:
    """A tool loop of `turns` replies, each reporting nearly the most one may, its prompt count growing as the
    conversation does (one that did not grow would be a prompt the server cut: values/prompt_cut.py)."""
    growing = [{**HUGE, "prompt_tokens": HUGE["prompt_tokens"] - turns + turn} for turn in range(1, turns + 1)]
    return [tool_call("read_file", {"path": "notes.txt"}, usage=usage) for usage in growing]


def test_a_paid_run_whose_record_is_refused_counts_as_unknown_never_0(ws: Workspace,  # noqa: F811
                                                                       standin: StandIn) -> None:
    # big/alpha loops on a tool for its 8 turns: 16,000,000 USD priced, past what a record holds (10,000,000)
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(context={"llm_probe": {"tools": ["read_file"]}}))
    ws.suite("main", ["big", "m1"])
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing=TOP_PRICE))
    standin.script("vendor/big", *huge_tool_loop(), match="2 + 2")
    standin.script("vendor/big", text("blue", usage=HUGE))
    first = run_claw(ws.root, *BUILD)
    assert first.code == 1 and "Traceback" not in first.stdout + first.stderr, first
    assert "run/big/alpha/0: ValueError: refusing to write a run record" in first.stdout, first.stdout
    assert len([r for r in standin.requests if r["model"] == "vendor/big"]) == 9  # 8 turns paid, and beta's one
    line = next(line for line in first.stdout.splitlines() if line.startswith("build "))
    assert "1 failed" in line and "cost spent ≥2000000.0000" in line and "(1 of 4 unknown, 1 of 4 priced)" in line, line
    done = run_claw(ws.root, "query", "select cost_usd, cost_known_usd, cost_unknown, cost_priced from builds",
                    "--format", "json")
    assert done.code == 0, done
    [row] = json.loads(done.stdout)
    assert (row["cost_usd"], row["cost_unknown"], row["cost_priced"]) == (None, 1, 1), row
    assert 2_000_000 < row["cost_known_usd"] < 2_000_000.001, row  # beta's priced run and m1's reported ones
