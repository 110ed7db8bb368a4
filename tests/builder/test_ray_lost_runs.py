"""builder/ray_client.py `after_lost_runs`: the outcome of an OpenClaw case run again after runs lost with their Ray
worker. Its cost is unknown whatever the finished run cost, at least the finished run's (its known part); the cluster
test (tests/distributed/test_ray_openclaw.py) kills a real worker, these the cases it does not reach."""

from __future__ import annotations

from typing import Any

from clawstore.builder.ray_client import LostContainers, after_lost_runs
from clawstore.providers.usage import RUN_LOST, TURN_NO_RESULT
from clawstore.runners.openclaw.runner import OpenClawOutcome


def _outcome(**usage: Any) -> OpenClawOutcome:
    return OpenClawOutcome({"status": "success", "usage": {"normalized": {"input_tokens": 100, "output_tokens": 10},
                                                           **usage}, "trace": [{"sequence": 0}]}, {})


def test_a_priced_run_after_a_lost_one_is_unknown_at_least_its_own_cost() -> None:
    usage = after_lost_runs(_outcome(cost_usd=0.00012, cost_source="priced"), 1).artifact["usage"]
    assert usage["cost_usd"] is None and usage["cost_source"] == "unknown" and usage["usage_rejected"] == RUN_LOST
    assert (usage["cost_known_usd"], usage["input_tokens_known"], usage["output_tokens_known"]) == (0.00012, 100, 10)


def test_a_run_that_sent_nothing_after_a_lost_one_is_unknown_with_no_known_part() -> None:
    """(The lost run may have sent what this one did not: never the known 0 of `nothing_sent`.)"""
    usage = after_lost_runs(_outcome(cost_usd=0.0, cost_source="priced", nothing_sent=True), 2).artifact["usage"]
    assert usage["cost_usd"] is None and usage["cost_source"] == "unknown" and "nothing_sent" not in usage
    assert not {"cost_known_usd", "input_tokens_known", "output_tokens_known"} & usage.keys(), usage


def test_a_run_unknown_itself_keeps_its_reason_and_known_part_and_the_trace_says_why() -> None:
    own = {"cost_usd": None, "cost_source": "unknown", "usage_rejected": TURN_NO_RESULT, "cost_known_usd": 0.5,
           "input_tokens_known": 7, "output_tokens_known": 3, "answered_requests": 2}
    artifact = after_lost_runs(_outcome(**own), 1).artifact
    assert artifact["usage"] == {"normalized": {"input_tokens": 100, "output_tokens": 10}, **own}
    assert [(e["sequence"], e.get("name")) for e in artifact["trace"]] == [(0, None), (1, "worker_lost")]


def test_no_lost_run_leaves_the_outcome_as_it_is() -> None:
    outcome = _outcome(cost_usd=0.00012, cost_source="priced")
    assert after_lost_runs(outcome, 0) is outcome


def test_the_trace_names_the_lost_runs_containers_stopped_and_says_which_may_still_spend() -> None:
    """(A container the driver could not stop may run the agent on, paid requests and all: the user must know.)"""
    containers = LostContainers(stopped=["claw-oc-1-turn1"], unstopped=["node 0a1b: its container engine did not "
                                                                       "answer (exit 1)"])
    [*_, event] = after_lost_runs(_outcome(cost_usd=0.1, cost_source="priced"), 2, containers).artifact["trace"]
    assert event["metadata"] == {"lost_runs": 2, "containers_stopped": ["claw-oc-1-turn1"],
                                 "containers_not_stopped": containers.unstopped}
    assert "claw-oc-1-turn1" in event["detail"] and "may be running the agent still" in event["detail"]
    assert "node 0a1b: its container engine did not answer" in event["detail"]
