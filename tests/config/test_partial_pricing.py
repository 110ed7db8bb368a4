"""A `pricing` (or `cost`) that leaves out `input` or `output` prices nothing (runners/pricing.py: a price not declared
is unknown, not 0), so every cost its provider does not report stays `?`. It validated without a word, and `--max-cost`
then refused the build saying "no `pricing` declared" beside the pricing the user had declared (session 77, found
following docs/plan.md against a server that reports no cost). `claw validate` and a build of the campaign now say so
in one warning line naming the file and the field; the exit code is unchanged, and the refusal names the missing
price."""

from __future__ import annotations

import json

import pytest

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.judging import eval_profile
from tests.support.workspace import Workspace


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def _priced(ws: Workspace, pricing: dict[str, float]) -> None:  # noqa: F811
    ws.edit("suites/main.yaml", lambda d: d["models"][1].update(pricing=pricing))


@pytest.mark.parametrize(("pricing", "missing"), [({"input": 0.1}, "output"), ({"output": 0.4, "batch": 0.5}, "input"),
                                                   ({"cacheRead": 0.01}, "input")])
def test_validate_warns_of_a_pricing_without_input_or_output(ws: Workspace, claw: Claw,  # noqa: F811
                                                             pricing: dict[str, float], missing: str) -> None:
    _priced(ws, pricing)
    code, out, err = claw("validate")
    assert code == 0 and out.startswith("OK:"), out + err
    [line] = _warnings(err)
    assert line.startswith("warning: configs/suites/main.yaml: models[1].pricing: ") and f"no '{missing}'" in line, line
    code, out, _ = claw("validate", "--json")
    [warning] = json.loads(out)["warnings"]
    assert warning["field"] == "models[1].pricing" and "stays unknown" in warning["message"]


def test_a_judge_s_cost_without_output_is_warned_of_too(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    eval_profile(ws)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(cost={"input": 0.1}))
    code, out, err = claw("validate")
    assert code == 0, out + err
    [line] = _warnings(err)
    assert line.startswith("warning: configs/evaluation_profiles/ev.yaml: judges[0].cost: ") and "no 'output'" in line


@pytest.mark.parametrize("pricing", [{"input": 0.1, "output": 0.4}, {"input": 0, "output": 0}, {}])
def test_a_whole_or_empty_pricing_gives_no_warning(ws: Workspace, claw: Claw,  # noqa: F811
                                                   pricing: dict[str, float]) -> None:
    _priced(ws, pricing)
    code, out, err = claw("validate")
    assert code == 0 and not _warnings(err), err


def test_max_cost_names_the_missing_price(ws: Workspace, claw: Claw, standin: StandIn) -> None:  # noqa: F811
    """The refusal said "no `pricing` declared: declare `pricing`" of a model whose pricing had no output price."""
    standin.script("*", text("4", usage={"cost": None}))  # (a server that reports no cost)
    _priced(ws, {"input": 0.1})
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing={"input": 0.1, "output": 0.4}))
    code, out, err = claw.build("--max-cost", "1")
    assert code == 2 and len(_warnings(err)) == 1, err
    assert "the cost of run m2 cannot be estimated" in err and "its `pricing` has no 'output' price" in err, err
    assert "no `pricing` declared" not in err and standin.counts() == {}, err
