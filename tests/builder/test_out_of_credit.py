"""An endpoint out of credit: a final 402 (OpenRouter's `{"error": {"code": 402}}`, no Retry-After) says the provider
will not serve this key. Before session 75 a judge's 402 stopped nothing: `stop_on_runner_error` stops runs only, and
every further judgement sent its request and got its 402 (20 runs: 18 more refused requests, each one more failure
line). Now no request goes to that endpoint for the rest of the build (runs or judgements), the build ends with one
line naming it and what was not done, exit 1; the next build, the credit topped up, asks exactly what was not asked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw, env  # noqa: F401 (fixture)
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import many_cases

OUT_OF_CREDIT = {"status": 402, "body": {"error": {
    "code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits"}}}
CONCURRENCY = 2


def _judge_times(standin: StandIn) -> list[float]:
    """When each judge request was received, in order."""
    return sorted(r["received_at"] for r in standin.requests if r["model"] == JUDGE)


@pytest.mark.parametrize("policy", [True, False], ids=["stop_on_runner_error", "go_on"])
def test_a_final_402_from_the_judge_stops_every_request_to_its_endpoint(
        tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        policy: bool) -> None:
    ws = many_cases(tmp_path / "ws", 10, concurrency=CONCURRENCY)  # 20 runs
    ws.run_profile(concurrency=CONCURRENCY, stop_on_runner_error=policy)
    eval_profile(ws, repetitions=1)
    monkeypatch.chdir(ws.root)
    claw = Claw(ws.root)
    standin.script(JUDGE, judge_reply(8), judge_reply(8), *[OUT_OF_CREDIT] * 40)
    standin.script("*", text("4"))

    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json")
    report = json.loads(out)
    assert code == 1, out + err
    judged = _judge_times(standin)
    # after the first 402 only what was already on its way when it came back: at most the other slot of
    # max_concurrency (a judgement that started before it and sent its request as the 402 was being answered)
    assert len(judged) <= 3 + (CONCURRENCY - 1), judged
    assert sum(1 for r in standin.requests if r["model"] != JUDGE) == 20
    stopped = report["stopped"]
    assert stopped is not None and standin.base_url in stopped and "402" in stopped, report
    assert "not sent" in stopped, stopped
    # the judgements refused are failures with what they cost; one that had started as the 402 came back fails before
    # sending (`not sent`, nothing spent); those not started are skipped: no cost of theirs made 0
    refused = [f for f in report["failures"] if f["node"].startswith("judge/")]
    not_sent = [f for f in refused if "not sent" in f["reason"]]
    assert len(refused) - len(not_sent) == len(judged) - 2 and len(not_sent) <= CONCURRENCY - 1, report["failures"]
    assert report["counts"].get("skipped", 0) + len(refused) == 18, report["counts"]

    # credit topped up: the next build asks the judgements not answered, and nothing else
    standin.reset()
    standin.script(JUDGE, judge_reply(8))
    standin.script("*", text("4"))
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json")
    assert code == 0, out + err
    assert sum(1 for r in standin.requests if r["model"] == JUDGE) == 18
    assert all(r["model"] == JUDGE for r in standin.requests), [r["model"] for r in standin.requests]


def test_a_final_402_to_a_run_stops_that_endpoint_only(
        tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Out of credit during the runs (stop_on_runner_error off: the user asked the build to go on after a fault): no
    further run or judgement goes to the endpoint that said so (the judge's, here); another endpoint's runs go on."""
    ws = many_cases(tmp_path / "ws", 10, concurrency=1)
    eval_profile(ws, repetitions=1)
    with StandIn() as other:
        ws.edit("suites/main.yaml", lambda d: d["models"][1].update(base_url=other.base_url))
        monkeypatch.chdir(ws.root)
        standin.script("*", text("4"), OUT_OF_CREDIT)
        code, out, err = Claw(ws.root).build("--evaluation-profile", "ev", "--output", "json")
        assert code == 1, out + err
        assert [r["model"] for r in standin.requests] == ["vendor/m1"] * 2  # no judgement: the judge's endpoint too
        assert [r["model"] for r in other.requests] == ["vendor/m2"] * 10
    report = json.loads(out)
    assert standin.base_url in (report["stopped"] or "") and other.base_url not in report["stopped"], report
