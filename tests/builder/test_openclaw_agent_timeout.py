"""An OpenClaw agent that loops on its model until the run's timeout: after an answered request it is the agent's
outcome, kept (never paid again by the next build); with no answered request it is a fault, retried. The fake
container's agent really asks the stand-in provider (tests/openclaw/fake_docker.py, `ask_provider`)."""

from __future__ import annotations

import json

from clawstore.testing.standin import StandIn, error, text
from tests.builder.test_build_openclaw import docker, oc, rows  # noqa: F401 - the OpenClaw campaign fixtures
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw
from tests.support.judging import eval_profile, judge_reply
from tests.support.workspace import Workspace, write_yaml

TIMEOUT_S = 3


def looping_agent(ws: Workspace, fake: FakeDocker) -> None:
    """One case (oc_a) for one model (m1), its agent asking its model every 0.2 s until the run's timeout."""
    fake.script(turns=[{"ask_provider": 0.2}])
    ws.edit("run_profiles/rp.yaml", lambda d: d["openclaw"].update(timeout_seconds=TIMEOUT_S))
    write_yaml(ws.configs / "suites" / "main.yaml", {
        "schema_version": 1, "suite_id": "main", "title": "Suite",
        "models": [{"model_id": "m1", "requested_model": "vendor/m1"}]})
    (ws.configs / "cases" / "oc_b" / "test.yaml").unlink()
    (ws.configs / "cases" / "oc_b").rmdir()


def run_row(claw: Claw) -> dict[str, object]:
    code, out, err = claw("query", "select status, error_code, cacheable from runs", "--format", "json")
    assert code == 0, out + err
    [row] = json.loads(out)
    return row


def test_an_agent_that_answered_and_used_its_whole_time_is_kept_and_never_paid_again(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    looping_agent(oc, docker)
    eval_profile(oc, repetitions=1)
    standin.script("judge/j1", judge_reply(3))
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    agent_asked = [r for r in standin.requests if r["model"] == "vendor/m1"]
    assert len(agent_asked) >= 2, agent_asked  # the agent looped on its model
    row = rows(out)[("m1", "oc_a")]
    assert (row["run"], row["status"], row["score"]) == ("exec", "timed_out", 3.0), row  # checked and judged
    assert run_row(claw) == {"status": "timed_out", "error_code": "openclaw_agent_timeout", "cacheable": True}
    asked, containers = len(standin.requests), len(docker.calls("run"))

    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json")
    assert rows(out)[("m1", "oc_a")]["run"] == "reuse", out + err
    assert len(standin.requests) == asked and len(docker.calls("run")) == containers  # nothing asked, nothing run

    code, out, err = claw.build("--force", "--case", "oc_a", "--output", "json")
    assert rows(out)[("m1", "oc_a")]["run"] == "exec", out + err
    assert len(standin.requests) > asked


def test_a_timeout_with_no_answered_request_is_a_fault_retried(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    looping_agent(oc, docker)
    standin.set_default(error(503, "provider down"))
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    asked = len(standin.requests)
    assert asked >= 2, asked
    assert run_row(claw) == {"status": "timed_out", "error_code": "openclaw_timeout", "cacheable": False}

    code, out, err = claw.build("--output", "json")
    assert len(standin.requests) > asked, out + err  # retried
    assert run_row(claw)["error_code"] == "openclaw_timeout"


def test_a_provider_that_went_down_after_answering_is_a_fault_retried(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """Answered once, then 503 until the timeout: the run ended on the provider's outage, not on the agent's work
    (before, one answered request made every later fault the agent's outcome, kept and judged as the model's)."""
    looping_agent(oc, docker)
    standin.script("vendor/m1", text("on it"), error(503, "provider down"))
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    asked = len(standin.requests)
    assert asked >= 3, asked  # answered, then refused at least twice
    assert run_row(claw) == {"status": "timed_out", "error_code": "openclaw_timeout", "cacheable": False}

    code, out, err = claw.build("--output", "json")
    assert len(standin.requests) > asked, out + err  # retried


def test_a_kept_agent_timeout_is_no_runner_error_to_stop_on(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """stop_on_runner_error, one run at a time: a looping agent (kept) lets the next case run; a provider down stops
    the build after the first run, the other skipped."""
    docker.script(turns=[{"ask_provider": 0.2}])
    oc.edit("run_profiles/rp.yaml", lambda d: (d["openclaw"].update(timeout_seconds=TIMEOUT_S),
                                               d["execution_policy"].update(max_concurrency=1,
                                                                            stop_on_runner_error=True)))
    write_yaml(oc.configs / "suites" / "main.yaml", {
        "schema_version": 1, "suite_id": "main", "title": "Suite",
        "models": [{"model_id": "m1", "requested_model": "vendor/m1"}]})
    code, out, err = claw.build("--output", "json")
    assert [r["run"] for r in json.loads(out)["rows"]] == ["exec", "exec"], out + err

    standin.set_default(error(503, "provider down"))
    code, out, err = claw.build("--force", "--output", "json")
    assert sorted(r["run"] for r in json.loads(out)["rows"]) == ["fail", "skip"], out + err
