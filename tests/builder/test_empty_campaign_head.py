"""A campaign that selects no case or lists no model (a misspelt tag, a commented-out model list) builds nothing and
leaves its head as it was: the head is what gc keeps, and an empty one let `claw gc` delete every paid result of
the campaign once their grace had passed (s60-review2)."""

from __future__ import annotations

import json

import pytest

from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import edit_yaml
from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _results(claw: Claw) -> list[tuple[str, str]]:
    code, out, err = claw("query", "--format", "json", "select model_id, case_id from runs order by 1, 2")
    assert code == 0, err
    return [(row["model_id"], row["case_id"]) for row in json.loads(out)]


@pytest.mark.parametrize("emptied", [{"case_selection": {"include_tags": ["no-such-tag"]}}, {"models": []}],
                         ids=["misspelt tag", "no model"])
def test_a_campaign_that_runs_nothing_leaves_its_results_to_gc_as_they_were(
        ws: Workspace, claw: Claw, standin: StandIn, emptied: dict[str, object]) -> None:
    assert claw.build()[0] == 0
    paid = len(standin.requests)
    before = _results(claw)
    assert len(before) == 4
    suite = ws.configs / "suites" / "main.yaml"
    original = suite.read_text()
    edit_yaml(suite, lambda doc: doc.update(emptied))
    code, out, err = claw.build()
    assert code == 0, err
    assert "this campaign runs nothing" in err and "its head is left as it was" in err, err
    assert claw("gc", "--grace", "0s")[0] == 0
    suite.write_text(original)
    assert _results(claw) == before
    code, out, err = claw.build("--output", "json")
    assert code == 0 and len(standin.requests) == paid, err  # (nothing gc deleted is asked again)
