"""What an OpenClaw run left unfinished by anything but the timeout spent: a container that crashed (or the engine
killed) or flooded its output after its agent's paid requests. Its cost and tokens stay unknown (a request may have
been in flight), but its transcript counts the requests answered, a lower bound shown as `≥` wherever a timed-out
run's is (tests/builder/test_openclaw_agent_timeout.py). The run stays a fault, retried, and each attempt's known
spend is counted by the build that paid it. The fake container's agent really asks the stand-in provider
(tests/openclaw/fake_docker.py, `ask_provider` with `asks`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from clawstore.report import view_data
from clawstore.store import Store
from clawstore.testing.standin import StandIn
from clawstore.values.costs import USD_DIGITS
from tests.builder.test_build_openclaw import docker, oc, rows  # noqa: F401 - the OpenClaw campaign fixtures
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw
from tests.support.workspace import Workspace, write_yaml

PRICES = {"input": 3.0, "output": 15.0}
ASKS = 3
UNFINISHED = {  # how the container ended after its agent's ASKS answered requests, and the run's error
    "crashed": ({"rc": 1, "stderr": "Segmentation fault\n"}, "openclaw_execution_failed"),
    "killed": ({"rc": 137}, "openclaw_execution_failed"),  # (the engine's SIGKILL: OOM, `docker kill`)
    "flooded": ({"flood": "stdout"}, "openclaw_output_limit"),
}


def one_run(ws: Workspace, fake: FakeDocker, ending: dict[str, Any], prices: bool = True) -> None:
    """One case (oc_a) for one model (m1), its agent asking its model ASKS times, then ending as `ending` says."""
    fake.script(turns=[{"ask_provider": 0.01, "asks": ASKS, **ending}])
    write_yaml(ws.configs / "suites" / "main.yaml", {
        "schema_version": 1, "suite_id": "main", "title": "Suite",
        "models": [{"model_id": "m1", "requested_model": "vendor/m1", **({"pricing": PRICES} if prices else {})}]})
    (ws.configs / "cases" / "oc_b" / "test.yaml").unlink()
    (ws.configs / "cases" / "oc_b").rmdir()


def query(claw: Claw, sql: str) -> list[dict[str, Any]]:
    code, out, err = claw("query", sql, "--format", "json")
    assert code == 0, out + err
    return json.loads(out)


@pytest.mark.parametrize("how", sorted(UNFINISHED))
def test_a_run_that_ended_without_a_result_spent_what_its_transcript_shows_answered_at_least(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn, how: str) -> None:  # noqa: F811
    """Before, only a turn the timeout ended had its transcript read: a crashed, killed or flooding container's run
    read `?` alone, however many paid requests its agent had made."""
    ending, code_expected = UNFINISHED[how]
    one_run(oc, docker, ending)
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    assert len([r for r in standin.requests if r["model"] == "vendor/m1"]) == ASKS
    [run] = query(claw, "select status, error_code, cacheable, input_tokens, cost_usd, cost_known_usd, artifact_id "
                        "from runs")
    assert (run["status"], run["error_code"], run["cacheable"]) == ("failed", code_expected, False), run  # retried
    usage = json.loads(Store(Path(os.environ["CLAW_STORE"])).get_bytes(run["artifact_id"]))["usage"]
    assert usage["answered_requests"] == ASKS and usage["input_tokens_known"] > 0, usage
    priced = (usage["input_tokens_known"] * PRICES["input"] + usage["output_tokens_known"] * PRICES["output"]) / 1e6
    assert usage["cost_known_usd"] == pytest.approx(priced, abs=1e-12), usage
    assert (run["input_tokens"], run["cost_usd"]) == (None, None), run  # never shown as the whole, nor as 0
    assert run["cost_known_usd"] == pytest.approx(priced, abs=1e-12), run
    metrics = json.loads(out)["metrics"]
    assert (metrics["cost_usd"], metrics["cost_unknown"], metrics["input_tokens"]) == (None, 1, None), metrics
    assert metrics["cost_known_usd"] == pytest.approx(priced, abs=1e-12), metrics
    assert metrics["input_tokens_known"] == usage["input_tokens_known"], metrics
    [row] = json.loads(out)["rows"]
    assert (row["run"], row["cost_usd"], row["cost_known_usd"]) == ("fail", None, usage["cost_known_usd"]), row


def test_a_retried_faults_attempts_each_count_their_known_spend_in_the_build_that_paid_it(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """A crash is a fault: the next build runs it again (its requests paid again), and both attempts' spend is known:
    each build's totals, `claw query`'s builds and run_history, cost_by_model, claw report and claw view."""
    one_run(oc, docker, UNFINISHED["crashed"][0])
    claw.build("--output", "json")
    code, out, err = claw.build("--progress", "plain")
    assert code == 1 and "Traceback" not in err, out + err
    assert len([r for r in standin.requests if r["model"] == "vendor/m1"]) == 2 * ASKS  # retried, paid again
    assert "cost spent ≥0.0" in out and "USD (1 of 1 unknown)" in out and "tokens in ≥" in out, out
    [line] = [line for line in out.splitlines() if line.startswith("m1 ")]
    assert line.split()[-1].startswith("≥0.0"), out
    builds = query(claw, "select cost_usd, cost_known_usd, input_tokens from builds order by started_at")
    assert [(b["cost_usd"], b["input_tokens"]) for b in builds] == [(None, None), (None, None)], builds
    first, second = (b["cost_known_usd"] for b in builds)
    assert first > 0 and first == pytest.approx(second), builds  # the same work, paid twice: each build its own
    history = query(claw, "select action, cost_usd, cost_known_usd from run_history order by build_started_at")
    assert [(h["action"], h["cost_usd"]) for h in history] == [("fail", None), ("fail", None)], history
    assert [h["cost_known_usd"] for h in history] == pytest.approx([first, second]), history
    store = Store(Path(os.environ["CLAW_STORE"]))
    [detail] = view_data.run_details(store, view_data.collect(store, ["main__rp__none"]))
    assert (detail["run_cost_usd"], detail["run_cost_known_usd"]) == (None, pytest.approx(second)), detail
    [tokens] = query(claw, "select input_tokens, output_tokens, input_tokens_known, output_tokens_known from runs")
    assert (tokens["input_tokens"], tokens["output_tokens"]) == (None, None), tokens  # never read as whole
    known_in, known_out = tokens["input_tokens_known"], tokens["output_tokens_known"]
    assert known_in > 0 and known_out > 0, tokens
    [by_model] = query(claw, "cost_by_model")
    assert (by_model["total_cost_usd"], by_model["cost_known_usd"]) == (None, round(second, USD_DIGITS)), by_model
    assert (by_model["input_tokens"], by_model["input_tokens_known"], by_model["output_tokens_known"]) == (
        None, known_in, known_out), by_model
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and f"≥{second:.5f}" in out, out + err
    [line] = [line for line in out.splitlines() if line.startswith("m1 ") and "oc_a" in line]
    assert f" ≥{known_in} " in line and f" ≥{known_out} " in line, out  # TOKENS_IN, TOKENS_OUT (before: ? and ?)
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--output", "json", "--no-chart")
    assert code == 0, out + err
    [row] = json.loads(out)["rows"]
    assert (row["input_tokens"], row["known_input_tokens"], row["known_output_tokens"]) == (None, known_in, known_out)


def test_a_crashed_run_without_prices_shows_its_tokens_known_part_and_its_cost_unknown(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    one_run(oc, docker, UNFINISHED["crashed"][0], prices=False)
    code, out, err = claw.build("--progress", "plain")
    assert code == 1 and "Traceback" not in err, out + err
    assert "cost spent ? USD (1 of 1 unknown)" in out and "; tokens in ≥" in out, out + err
    assert "tokens in ≥0 " not in out and " out ≥0;" not in out, out


def test_a_crash_before_any_answer_still_reads_unknown_alone(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn) -> None:  # noqa: F811
    """No answered request in its transcript (a crash at start): `?`, no known part (never `≥0` read as spent)."""
    one_run(oc, docker, UNFINISHED["crashed"][0])
    docker.script(turns=[{"rc": 1, "stderr": "Segmentation fault\n"}])
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    metrics = json.loads(out)["metrics"]
    assert (metrics["cost_usd"], metrics["cost_known_usd"], metrics["cost_unknown"]) == (None, 0.0, 1), metrics
