"""`cost`, OpenClaw's name for a model's `pricing` (docs/configuration.md): it prices what the provider does not."""

from __future__ import annotations

import json

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.workspace import Workspace

PRICES = {"input": 2.0, "output": 8.0}


def test_a_cost_beside_an_empty_pricing_prices_the_runs(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    # `pricing:` with its prices commented out (null) hid the `cost` given below it: every cost unknown.
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=None, cost=PRICES) for m in d["models"]])
    standin.script("*", text("four", usage={"cost": None}))  # a server that reports no cost
    code, out, err = claw("validate")
    assert code == 0, out + err
    assert claw.build()[0] == 0
    code, out, err = claw("query", "select input_tokens, output_tokens, cost_usd, cost_source from runs",
                          "--format", "json")
    assert code == 0, err
    runs = json.loads(out)
    assert len(runs) == 4
    for run in runs:
        expected = (run["input_tokens"] * PRICES["input"] + run["output_tokens"] * PRICES["output"]) / 1e6
        assert run["cost_source"] == "priced" and abs(run["cost_usd"] - expected) < 1e-12, run


def test_the_same_prices_under_both_names_still_validate(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    # Valid before session 57 (the `cost` beside a `pricing` was ignored); refused since, though nothing is ignored
    # when both say the same prices. Different prices stay refused (tests/config/test_broken_corpus.py).
    both = {"pricing": {**PRICES, "batch": 0.5}, "cost": PRICES}
    ws.edit("suites/main.yaml", lambda d: [m.update(both) for m in d["models"]])
    standin.script("*", text("four", usage={"cost": None}))
    code, out, err = claw("validate")
    assert code == 0, out + err
    assert claw.build()[0] == 0
    code, out, err = claw("query", "select cost_source from runs", "--format", "json")
    assert code == 0 and json.loads(out) == [{"cost_source": "priced"}] * 4, out + err
