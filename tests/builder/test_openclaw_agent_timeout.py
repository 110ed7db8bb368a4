"""An OpenClaw agent that loops on its model until the run's timeout: after an answered request it is the agent's
outcome, kept (never paid again by the next build); with no answered request it is a fault, retried. The fake
container's agent really asks the stand-in provider (tests/openclaw/fake_docker.py, `ask_provider`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from clawstore.report import view_data
from clawstore.store import Store
from clawstore.testing.standin import StandIn, error, text
from clawstore.values.costs import USD_DIGITS
from tests.builder.test_build_openclaw import docker, oc, rows  # noqa: F401 - the OpenClaw campaign fixtures
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw
from tests.support.judging import eval_profile, judge_reply
from tests.support.workspace import Workspace, write_yaml

# 2 s: the looping agent (a request every 0.2 s) is answered about 9 times within it, where the tests need 2-3; each
# test waits it out once or twice (3 s was 13 s of the file's 50).
TIMEOUT_S = 2


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
    metrics = json.loads(out)["metrics"]  # what the answered request counted, spent at least (before session 61: ?)
    assert metrics["input_tokens"] is None and metrics["input_tokens_known"] > 0, metrics

    code, out, err = claw.build("--output", "json")
    assert len(standin.requests) > asked, out + err  # retried
    assert run_row(claw)["error_code"] == "openclaw_timeout"
    metrics = json.loads(out)["metrics"]  # the retry's own spend (refused throughout): not the first build's again
    assert metrics["input_tokens"] is None and metrics["input_tokens_known"] == 0, metrics


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

PRICES = {"input": 3.0, "output": 15.0}


def test_what_a_timed_out_agent_spent_is_its_transcripts_answered_requests_at_least(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """A looping agent cut off by the timeout made paid requests; OpenClaw's transcript counts every one answered. The
    run's spend is what those rows say, a lower bound (a request may have been in flight at the kill): before, `?`,
    so 700 paid requests told the user nothing of their cost."""
    looping_agent(oc, docker)
    oc.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing=PRICES))
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    asked = len([r for r in standin.requests if r["model"] == "vendor/m1"])
    assert run_row(claw)["error_code"] == "openclaw_agent_timeout"
    metrics = json.loads(out)["metrics"]
    assert metrics["cost_usd"] is None and metrics["cost_unknown"] == 1, metrics  # never shown as the whole cost
    known = metrics["cost_known_usd"]
    assert known > 0, metrics  # ... nor as zero, nor as unknown
    code, out, err = claw("query", "select input_tokens, output_tokens, cost_usd, cost_source, record_id, artifact_id "
                          "from runs", "--format", "json")
    assert code == 0, out + err
    [row] = json.loads(out)
    assert (row["input_tokens"], row["output_tokens"], row["cost_usd"], row["cost_source"]) == (
        None, None, None, "unknown"), row
    store = Store(Path(os.environ["CLAW_STORE"]))
    usage = json.loads(store.get_bytes(row["artifact_id"]))["usage"]
    answered = usage["answered_requests"]
    assert asked - 1 <= answered <= asked and answered >= 2, (asked, usage)  # the last one may have been in flight
    assert usage["input_tokens_known"] % answered == 0 and usage["output_tokens_known"] % answered == 0, usage
    priced = (usage["input_tokens_known"] * PRICES["input"] + usage["output_tokens_known"] * PRICES["output"]) / 1e6
    assert abs(usage["cost_known_usd"] - priced) < 1e-12 and abs(known - priced) < 1e-12, (usage, known)
    recorded = json.loads(store.get_bytes(row["record_id"]))["metrics"]
    assert (recorded["cost_usd"], recorded["cost_source"], recorded["input_tokens"]) == (None, "unknown", None)
    assert (recorded["cost_known_usd"], recorded["input_tokens_known"]) == (usage["cost_known_usd"],
                                                                           usage["input_tokens_known"]), recorded
    code, out, err = claw("query", "select cost_usd, cost_known_usd from builds", "--format", "json")
    assert code == 0 and json.loads(out) == [{"cost_usd": None, "cost_known_usd": known}], out + err
    code, out, err = claw("query", "cost_by_model", "--format", "json")
    assert code == 0, out + err
    [by_model] = json.loads(out)
    assert (by_model["total_cost_usd"], by_model["cost_known_usd"]) == (None, round(known, USD_DIGITS)), by_model
    [detail] = view_data.run_details(store, view_data.collect(store, ["main__rp__none"]))  # claw view's run page
    assert (detail["run_cost_usd"], detail["run_cost_known_usd"]) == (None, known), detail
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and f"≥{known:.5f}" in out, out + err
    code, out, err = claw.build("--force", "--progress", "plain")  # the build's own row and line
    [line] = [line for line in out.splitlines() if line.startswith("m1 ")]
    assert line.split()[-1].startswith("≥0.00"), out
    assert "; cost spent ≥0.00" in out and "USD (1 of 1 unknown)" in out and "tokens in ≥" in out, out


def test_a_timed_out_agent_without_prices_spent_unknown_tokens_at_least_the_transcripts(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """No declared price: its cost stays `?` (OpenClaw reports none of the provider's), its tokens `≥` what the
    transcript counts."""
    looping_agent(oc, docker)
    code, out, err = claw.build("--progress", "plain")
    assert code == 1 and "Traceback" not in err, out + err
    assert "cost spent ? USD (1 of 1 unknown)" in out and "; tokens in ≥" in out, out + err
    assert "tokens in ≥0 " not in out and " out ≥0;" not in out, out


def test_a_transcript_counting_past_a_records_bounds_leaves_the_cost_unknown_and_the_run_recorded(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """The agent owns its transcript: rows each within a reply's bounds may sum past a record's (10**12 tokens). Its
    known part is then left out (`?`, never a sum claw could not store), and the run is recorded, kept, not paid
    again; with that sum in its metrics the record could not be written (metrics_problem)."""
    from clawstore.values.bounds import MAX_RECORD_TOKENS, MAX_REPLY_TOKENS

    looping_agent(oc, docker)
    oc.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing=PRICES))
    row = {"type": "message", "message": {"role": "assistant", "content": [], "stopReason": "toolUse",
                                          "usage": {"input": MAX_REPLY_TOKENS, "output": 1}}}
    lines = "\n".join(json.dumps(row) for _ in range(MAX_RECORD_TOKENS // MAX_REPLY_TOKENS + 1))
    docker.script(turns=[{"write": {"../state/agents/a/sessions/forged.jsonl": lines}, "ask_provider": 0.2}])
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    assert run_row(claw) == {"status": "timed_out", "error_code": "openclaw_agent_timeout", "cacheable": True}
    metrics = json.loads(out)["metrics"]
    assert (metrics["cost_usd"], metrics["cost_known_usd"], metrics["cost_unknown"]) == (None, 0.0, 1), metrics
    code, out, err = claw.build("--output", "json")
    assert rows(out)[("m1", "oc_a")]["run"] == "reuse", out + err
