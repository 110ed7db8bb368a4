"""`claw query`'s runs.attempts and judgements.attempts: how many requests a run or judgement took, its retries after
a 429 and the judge's invalid answers asked again included (before session 73 only in the artifact: `claw cat`);
NULL for a record that does not say (one made before session 73), never a guessed 1 (the stand-in server, `claw`
in process)."""

from __future__ import annotations

import json

from clawstore.testing.standin import StandIn, error, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace


def _attempts(claw: Claw, table: str) -> list[int | None]:
    code, out, err = claw("query", f"select attempts from {table} order by model_id, case_id", "--format", "json")
    assert code == 0, err
    return [row["attempts"] for row in json.loads(out)]


def test_a_429_then_an_answer_is_2_attempts_and_a_judge_asked_again_counts_every_request(
        ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    eval_profile(ws, repetitions=1, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 1}])
    standin.script("vendor/m1", error(429, retry_after=0.05), text("four"))
    # the judge: a 429 then an invalid answer (its first attempt, 2 requests), then a valid one (its second)
    standin.script(JUDGE, error(429, retry_after=0.05), text("not json"), judge_reply(7))
    code, _, err = claw.build("--evaluation-profile", "ev")
    assert code == 0, err
    assert len(standin.requests) == 5
    assert _attempts(claw, "runs") == [2]
    assert _attempts(claw, "judgements") == [3]

