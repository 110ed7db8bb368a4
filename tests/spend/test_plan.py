"""`claw plan` and `claw build --max-cost` against the stand-in provider."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from clawstore.spend.history import load_history
from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
WORDS = "river harbor lantern orbit meadow ledger signal copper window garden engine archive compass".split()


def plan(claw: Claw, *extra: str) -> dict[str, Any]:
    code, out, err = claw("plan", *CAMPAIGN, "--output", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def build(claw: Claw, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = claw("build", *CAMPAIGN, "--output", "json", *extra)
    assert out, err
    return code, json.loads(out)


def add_cases(ws: Workspace, standin: StandIn, names: list[str], rng: random.Random) -> None:
    """Cases of varied prompt length; each model answers each case with its own varied length."""
    for name in names:
        prompt = f"Case {name}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))
        ws.case(name, prompt)
        for model in ("vendor/m1", "vendor/m2"):
            standin.script(model, text(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))),
                           match=f"Case {name}:")


def test_plan_counts_what_the_build_sends_and_estimates_its_cost(ws: Workspace, claw: Claw,
                                                                  standin: StandIn) -> None:
    rng = random.Random(7)
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    add_cases(ws, standin, [f"old{i}" for i in range(6)], rng)
    ws.suite("main", ["m1", "m2"])
    code, first = build(claw)
    assert code == 0
    assert plan(claw)["requests"] == 0  # everything built: nothing to send

    add_cases(ws, standin, [f"new{i}" for i in range(6)], rng)
    planned = plan(claw)
    before = len(standin.requests)
    code, second = build(claw)
    assert code == 0
    sent = standin.requests[before:]
    runs = sum(1 for r in sent if r["model"] != JUDGE)
    judges = len(sent) - runs
    by_kind = {(line["kind"], line["name"]): line["requests"] for line in planned["lines"]}
    assert planned["requests"] == len(sent) and planned["requests_exact"]
    assert by_kind == {("run", "m1"): 6, ("run", "m2"): 6, ("judge", "j1"): 36}
    assert (runs, judges) == (12, 36)
    actual = second["metrics"]["cost_usd"]
    error = planned["estimated_cost_usd"] / actual - 1
    print(f"plan: {planned['requests']} requests (build sent {len(sent)}); estimated "
          f"{planned['estimated_cost_usd']:.6f} USD, build reported {actual:.6f} USD ({error:+.1%})")
    assert abs(error) <= 0.15
    assert {s for line in planned["lines"] for s in line["cost_sources"]} == {"reported"}


def test_plan_of_a_new_model_uses_declared_pricing(ws: Workspace, claw: Claw) -> None:
    ws.suite("main", ["m1"])
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing={"input": 2.0, "output": 8.0}))
    eval_profile(ws)
    out = plan(claw)
    run_line = next(line for line in out["lines"] if line["kind"] == "run")
    judge_line = next(line for line in out["lines"] if line["kind"] == "judge")
    assert run_line["cost_sources"] == {"priced": 2} and run_line["token_sources"] == {"default": 2}
    expected = (run_line["estimated_input_tokens"] * 2.0 + run_line["estimated_output_tokens"] * 8.0) / 1e6
    assert abs(run_line["estimated_cost_usd"] - expected) < 1e-6
    assert judge_line["cost_sources"] == {"unknown": 6}  # the judge declares no price and never ran
    assert out["estimated_cost_usd"] is None and out["requests"] == 8


def test_judge_pricing_is_not_part_of_the_judge_key(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    assert build(claw)[0] == 0
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing={"input": 1, "output": 2}))
    assert plan(claw)["requests"] == 0
    before = len(standin.requests)
    assert build(claw)[0] == 0 and len(standin.requests) == before


def test_max_cost_refuses_a_plan_over_budget_and_sends_nothing(ws: Workspace, claw: Claw,
                                                                standin: StandIn) -> None:
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 1000.0, "output": 1000.0})
                                           for m in d["models"]])
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", "--max-cost", "0.01")
    assert code == 2
    assert "exceeds --max-cost 0.01 USD" in err and err.count("\n") == 1
    assert "plan main__rp__none: 4 request(s)" in out
    assert standin.requests == []


def test_max_cost_must_be_a_finite_amount(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    # `nan` passed `min=0` (every comparison with it is false): a budget that never stops the build.
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 0.01, "output": 0.01}) for m in d["models"]])
    standin.script("*", text("pricey", usage={"cost": 0.5}))
    for value in ("nan", "inf"):
        code, _, err = claw("build", "--suite", "main", "--run-profile", "rp", "--max-cost", value)
        assert code == 2 and "--max-cost" in err and f"expected a finite amount of USD, got {value}" in err, err
    assert standin.requests == []


def test_max_cost_refuses_when_the_cost_cannot_be_estimated(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", "--max-cost", "5")
    assert code == 2 and "cannot be estimated" in err and standin.requests == []


def test_max_cost_stops_starting_runs_once_spent_and_keeps_what_finished(ws: Workspace, claw: Claw,
                                                                          standin: StandIn) -> None:
    # The declared price says the build is cheap; the provider then reports 0.5 USD per request.
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 0.01, "output": 0.01}) for m in d["models"]])
    ws.run_profile(concurrency=1)
    standin.script("*", text("pricey", usage={"cost": 0.5}))
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", "--max-cost", "1", "--output", "json")
    report = json.loads(out)
    assert code == 1
    assert [r["run"] for r in report["rows"]] == ["exec", "exec", "skip", "skip"]
    assert report["metrics"]["cost_usd"] == 1.0 and "--max-cost 1 USD reached" in report["stopped"]
    assert len(standin.requests) == 2
    code, out, _ = claw("build", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0 and [r["run"] for r in json.loads(out)["rows"]] == ["reuse", "reuse", "exec", "exec"]
    assert len(standin.requests) == 4


def test_max_cost_stops_starting_judgements_and_keeps_the_runs(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    eval_profile(ws)
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 0.01, "output": 0.01}) for m in d["models"]])
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing={"input": 0.01, "output": 0.01}))
    ws.run_profile(concurrency=1)
    standin.script(JUDGE, {**judge_reply(7), "usage": {"cost": 0.5}})
    standin.script("*", text("cheap", usage={"cost": 0.0}))
    code, out = build(claw, "--max-cost", "1")
    assert code == 1 and "--max-cost 1 USD reached" in out["stopped"]
    assert [r["run"] for r in out["rows"]] == ["exec"] * 4 and out["metrics"]["cost_usd"] == 1.0
    assert sum(1 for r in standin.requests if r["model"] == JUDGE) == 2
    code, out = build(claw)
    assert code == 0 and sum(1 for r in standin.requests if r["model"] == JUDGE) == 12
    assert [r["run"] for r in out["rows"]] == ["reuse"] * 4


def test_a_tool_loop_is_planned_as_a_minimum(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """A run with tools sends one request per turn of its loop: the plan's count is a lower bound (≥), and
    the build does send more; a plan of runs without tools stays exact."""
    from clawstore.testing.standin import tool_call

    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    assert "plan main__rp__none: 1 request(s);" in out and "≥" not in out
    ws.case("alpha", "Use the tools.", input={"messages": [{"role": "user", "content": "Write a note."}],
                                              "context": {"llm_probe": {"tools": ["write_file"]}}})
    standin.script("vendor/m1", tool_call("write_file", {"path": "a.txt", "content": "1"}),
                   tool_call("write_file", {"path": "b.txt", "content": "2"}), text("done"))
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("run "))
    assert row.split()[3:5] == ["≥", "1"]
    assert "plan main__rp__none: ≥ 1 request(s) (at least: a run with tools sends one per turn of its tool loop" in out
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp", "--output", "json")
    planned = json.loads(out)
    assert planned["requests"] == 1 and planned["requests_minimum"] and planned["lines"][0]["requests_minimum"]
    assert claw("build", "--suite", "main", "--run-profile", "rp")[0] == 0
    assert len(standin.requests) == 3  # what the plan's "≥ 1" warned of


def test_a_node_whose_tokens_are_unknown_is_no_history(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    # m1's replies say cost "0.5": kept, their tokens unknown (NULL); a plan must not read them as 0 tokens
    standin.script("vendor/m1", text("4", usage={"cost": "0.5"}))
    assert claw("build", "--suite", "main", "--run-profile", "rp")[0] == 0
    history = load_history(Store(Path(os.environ["CLAW_STORE"])))
    assert "vendor/m1" not in history.run_models
    assert history.run_models["vendor/m2"].count == 2 and history.run_models["vendor/m2"].input_tokens > 0
