"""An OpenClaw agent out of credit: the agent calls its provider itself, around claw's client, so before session 76 its
402 was only a failed run (or, a turn ended with a billing notice and exit 0, a `success`), and the build went on
starting agents that each met the same 402. claw reads the agent's transcript (runners/openclaw/transcript.py):
its model's last request refused with HTTP 402 makes the run `openclaw_out_of_credit` (a fault, retried), and no run or
judgement starts against that endpoint for the rest of the build, which names it and what was not sent, as a chat
request's 402 does (tests/builder/test_out_of_credit.py). The fake container's agent really asks the stand-in."""

from __future__ import annotations

import json

import pytest

from clawstore.testing.standin import StandIn, text
from tests.builder.test_build_openclaw import docker, oc, rows  # noqa: F401 - the OpenClaw campaign fixtures
from tests.builder.test_out_of_credit import OUT_OF_CREDIT
from tests.openclaw.conftest import FakeDocker, payload
from tests.support.claw import Claw
from tests.support.workspace import Workspace

# How a turn whose model refused may end: 2026.9.6 exits 1 (tests/openclaw/test_real_engine.py); a release ending it
# with a billing notice as its reply and exit 0 (not seen; OpenClaw has such a notice) must not make it a success.
BILLING_NOTICE = {**payload("⚠️ API provider returned a billing error — your API key has run out of credits."),
                  "meta": {**payload("")["meta"], "stopReason": "error"}}
TURNS = {"exit_0_notice": {"payload": BILLING_NOTICE, "rc": 0},
         "exit_1": {"rc": 1, "stderr": "Error: 402 Insufficient credits\n"}}


@pytest.mark.parametrize("ending", sorted(TURNS))
def test_an_agent_refused_with_a_402_stops_the_runs_against_its_endpoint(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn, ending: str) -> None:  # noqa: F811
    oc.edit("run_profiles/rp.yaml", lambda d: d["execution_policy"].update(max_concurrency=1))
    docker.script(turns=[{"ask_provider": 0.01, "asks": 1, **TURNS[ending]}])
    standin.script("*", OUT_OF_CREDIT)
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    assert len(docker.calls("agent")) == 1 and len(standin.requests) == 1  # one agent started, of 4
    report = json.loads(out)
    stopped = report["stopped"] or ""
    assert standin.base_url in stopped and "402" in stopped and "Insufficient credits" in stopped, report
    assert "not sent 3 runs" in stopped, stopped
    failed = [r for r in rows(out).values() if r["run"] == "fail"]
    assert len(failed) == 1 and failed[0]["status"] == "failed", rows(out)
    code, query, _ = claw("query", "select error_code, cacheable from runs", "--format", "json")
    assert json.loads(query) == [{"error_code": "openclaw_out_of_credit", "cacheable": False}], query

    # credit topped up: the next build runs the 4 (the refused one again: not cached)
    standin.reset()
    standin.script("*", text("done"))
    docker.script(turns=[{"ask_provider": 0.01, "asks": 1, "write": {"report.md": "# Report\nAll done.\n"},
                          "payload": payload("Wrote report.md")}])
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    assert {r["run"] for r in rows(out).values()} == {"exec"} and len(standin.requests) == 4


def test_a_402_to_an_llm_probe_run_stops_the_openclaw_runs_of_its_endpoint(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """The other way: an llm_probe run's 402 (claw's own client) keeps the agents of that endpoint from starting
    (before session 76 an OpenClaw run had no endpoint for the stop: every agent started and met the 402 itself)."""
    oc.edit("run_profiles/rp.yaml", lambda d: d["execution_policy"].update(max_concurrency=1))
    oc.case("a_probe", "What is 2 + 2?")  # (first in plan order: its runs go before the agents')
    docker.script(turns=[{"ask_provider": 0.01, "asks": 1, **TURNS["exit_1"]}])
    standin.script("*", OUT_OF_CREDIT)
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    asked = [(r["model"], r["body"]["messages"][-1]["content"]) for r in standin.requests]
    assert len(asked) == 1 and docker.calls("agent") == [], asked  # the llm_probe run's request, no agent
    stopped = json.loads(out)["stopped"] or ""
    assert standin.base_url in stopped and "not sent 5 runs" in stopped, stopped
