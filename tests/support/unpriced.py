"""A campaign built for real against the stand-in whose costs are partly or wholly unknown, for the score-vs-cost
charts (report/chart.py, the view's SVG): m2 a self-hosted server with no price, its runs and their judgements
reporting no cost (its cost wholly unknown); m1 priced but one judgement of it unpriced (its cost `≥` the rest)."""

from __future__ import annotations

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.judging import EV, JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

NO_COST = {"cost": None}  # what vLLM, Ollama and llama.cpp send: tokens, no cost
UNKNOWN, AT_LEAST = "m2", "m1"
SCORES = {UNKNOWN: 8.0, AT_LEAST: 6.0}  # the unpriced model scores best: the chart must not also show it free


def build_unpriced(ws: Workspace, standin: StandIn, claw: Claw) -> None:
    """The standard workspace (m1, m2 × alpha, beta) judged once per run, built: exit 0."""
    eval_profile(ws, repetitions=1)
    standin.script("vendor/m2", text("m2 self-hosted answer", usage=NO_COST))
    standin.script("vendor/m1", text("m1 priced answer on alpha"), match="2 + 2")
    standin.script("vendor/m1", text("m1 priced answer"))
    standin.script(JUDGE, {**judge_reply(SCORES[UNKNOWN]), "usage": NO_COST}, match="m2 self-hosted answer")
    standin.script(JUDGE, {**judge_reply(SCORES[AT_LEAST]), "usage": NO_COST}, match="m1 priced answer on alpha")
    standin.script(JUDGE, judge_reply(SCORES[AT_LEAST]))
    code, out, err = claw.build(*EV)
    assert code == 0, out + err
