"""`claw plan` and `claw build --max-cost` with judgements pending in a provider batch (docs/plan.md, docs/batch.md): a
build collects them and sends nothing for them again, so the plan counts no request and no cost for them.

Before session 75 the plan counted each pending judgement as a request with its estimated cost, and `claw build
--max-cost` refused to start over that estimate: the build that would have collected the batch, sending nothing, was
refused ("nothing was sent"), and the judgements already paid for at the provider stayed uncollected.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import JUDGE, build, eval_profile, judge_reply, judge_requests
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


def plan(claw: Claw) -> dict[str, Any]:
    code, out, err = claw("plan", *CAMPAIGN, "--output", "json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def pending(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """4 runs built (2 models x 2 cases), their 12 judgements submitted in one batch the provider has not answered."""
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    assert claw.build()[0] == 0
    standin.batch_settings(delay=60)
    code, report = build(claw, "--batch")
    assert code == 0 and report["pending_in_batches"] == 12, report
    return ws


def test_the_plan_counts_no_request_for_a_judgement_pending_in_a_batch(pending: Workspace, claw: Claw,
                                                                       standin: StandIn) -> None:
    found = plan(claw)
    assert found["requests"] == 0 and found["estimated_cost_usd"] == 0, found
    [judge] = [line for line in found["lines"] if line["kind"] == "judge"]
    assert judge["requests"] == 0 and judge["pending"] == 12
    code, out, err = claw("plan", *CAMPAIGN)
    assert code == 0 and "0 request(s)" in out and "12 pending in provider batches" in out, out + err
    code, report = build(claw)  # what the plan said: the build sends nothing one by one
    assert code == 0 and report["pending_in_batches"] == 12 and judge_requests(standin) == 0


def test_max_cost_does_not_refuse_the_build_that_collects_a_batch(pending: Workspace, claw: Claw,
                                                                 standin: StandIn) -> None:
    standin.batch_settings(delay=0)  # the provider has answered: a build collects the lines
    code, report = build(claw, "--max-cost", "0")
    assert code == 0, report
    assert report["pending_in_batches"] == 0 and {r["score"] for r in report["rows"]} == {7.0}
    assert judge_requests(standin) == 0 and standin.batch_stats()["lines"] == 12
