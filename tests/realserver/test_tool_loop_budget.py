"""A model that loops on tool calls, against the real llama.cpp server: the relay sends every request with tools on
with a forced tool choice, so the model never answers. `max_turns` stops each run where docs/runners.md says (an
`incomplete` run, the model's outcome: kept); what it spent is every turn's tokens; `--max-cost` lets the run in flight
finish its loop and starts no other; a rebuild pays for no loop that finished."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from tests.realserver.campaign import KEY_ENV, judged_workspace, records
from tests.realserver.relay import Relay
from tests.support.claw import Claw
from tests.support.workspace import Workspace

TURNS = 3
PRICES = {"input": 100.0, "output": 400.0}  # USD per million tokens
CASES = {f"case{i}": f"Write a note number {i}." for i in range(3)}


@pytest.fixture
def ws(tmp_path: Path, relay: Relay, server_env: None, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    workspace = judged_workspace(tmp_path / "ws", relay.base_url, CASES, concurrency=1)
    for case in CASES:
        workspace.edit(f"cases/{case}/test.yaml", lambda d: d["input"].update(
            context={"llm_probe": {"tools": ["write_file"]}}))
    workspace.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(max_turns=TURNS, max_tokens=24))
    workspace.edit("suites/main.yaml", lambda d: d["models"][0].update(pricing=PRICES))
    relay.tool_choice = {"type": "function", "function": {"name": "write_file"}}
    monkeypatch.chdir(workspace.root)
    return workspace


@pytest.fixture
def claw(ws: Workspace) -> Claw:
    return Claw(ws.root)


def priced(usages: list[dict[str, int]]) -> float:
    return sum(u["prompt_tokens"] * PRICES["input"] + u["completion_tokens"] * PRICES["output"] for u in usages) / 1e6


def run_usages(relay: Relay, case: str) -> list[dict[str, int]]:
    return [e["response"]["usage"] for e in relay.chats() if CASES[case] in json.dumps(e["request"]["messages"])]


def test_a_looping_model_stops_at_max_turns_each_turn_counted_and_kept(claw: Claw, relay: Relay) -> None:
    code, out, err = claw.build("--output", "json")
    report = json.loads(out)
    assert code == 1 and report["counts"]["failed"] == 0, out + err  # (incomplete: the model's outcome, kept)
    assert len(relay.chats()) == TURNS * len(CASES)
    assert all(e["response"]["choices"][0]["message"].get("tool_calls") for e in relay.chats())  # it never answered
    by_case = {r.address["case_id"]: r for r in records("run")}
    for case in CASES:
        run, usages = by_case[case], run_usages(relay, case)
        assert len(usages) == TURNS and run.status == "incomplete" and run.cacheable, run
        assert run.error and run.error["code"] == "max_turns_exceeded", run.error
        # a real server's counts grow with the conversation (its cache reused): the cut detector never trips here
        # (values/prompt_cut.py; llama-cpp-python refuses a prompt over n_ctx, it never cuts one)
        prompts = [u["prompt_tokens"] for u in usages]
        assert prompts == sorted(set(prompts)) and len(set(prompts)) == TURNS, prompts
        assert run.metrics.input_tokens == sum(u["prompt_tokens"] for u in usages)
        assert run.metrics.output_tokens == sum(u["completion_tokens"] for u in usages)
        assert run.metrics.cost_source == "priced" and run.metrics.cost_usd == pytest.approx(priced(usages))
    total = priced([e["response"]["usage"] for e in relay.chats()])
    assert report["metrics"]["cost_usd"] == pytest.approx(total, abs=1e-6), report["metrics"]
    code, out, err = claw.build()
    assert code == 1 and len(relay.chats()) == TURNS * len(CASES), out + err  # no loop paid again


def test_max_cost_lets_the_loop_in_flight_finish_and_starts_no_other(claw: Claw, relay: Relay) -> None:
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0, err
    estimate = json.loads(out)["estimated_cost_usd"]
    limit = f"{estimate * 1.01:.6f}"  # the plan fits; one loop of TURNS requests spends more than a third of it
    code, out, err = claw.build("--max-cost", limit)
    assert code == 1 and "stopped: --max-cost" in out + err, out + err
    first = [case for case in CASES if run_usages(relay, case)]
    sent = len(relay.chats())
    assert sent % TURNS == 0 and len(first) == sent // TURNS < len(CASES), (first, sent)  # whole loops only
    spent = re.search(r"spent (\d+\.\d+) USD", out + err)
    assert spent and float(spent.group(1)) == pytest.approx(priced([e["response"]["usage"] for e in relay.chats()]),
                                                             abs=2e-6), out + err
    code, out, err = claw.build()
    assert code == 1 and "0 skipped" in out, out + err
    for case in first:
        assert len(run_usages(relay, case)) == TURNS  # the finished loops were kept, not paid again
    assert len(relay.chats()) == TURNS * len(CASES)


def test_a_build_killed_mid_loop_says_it_spent_an_unknown_amount_and_the_loop_is_asked_again(
        claw: Claw, relay: Relay) -> None:
    """Two of a loop's three turns answered, then SIGKILL: those turns were paid and nothing records them. The killed
    build is named, its spending unknown (never 0); the next build runs that loop again, whole."""
    answered: list[dict[str, object]] = []
    relay.on_reply = answered.append
    build_process = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    try:
        deadline = time.monotonic() + 60
        while len(answered) < TURNS - 1 and time.monotonic() < deadline and build_process.poll() is None:
            time.sleep(0.005)
    finally:
        build_process.send_signal(signal.SIGKILL)
        build_process.wait()
    relay.on_reply = None
    assert len(run_usages(relay, "case0")) in (TURNS - 1, TURNS) and not records("run")
    code, _, err = claw("status", "--suite", "main", "--run-profile", "rp")
    [note] = [line for line in err.splitlines() if "was killed before it finished" in line] or [err]
    assert code == 0 and "spent an unknown amount" in note and "0.000000" not in note, err
    code, out, _ = claw("query", "select input_tokens, cost_usd from builds", "--format", "json")
    assert code == 0 and json.loads(out) == [{"input_tokens": None, "cost_usd": None}], out
    before = len(run_usages(relay, "case0"))
    code, out, err = claw.build()
    assert code == 1 and len(run_usages(relay, "case0")) == before + TURNS, out + err



def test_a_loop_that_outgrows_the_context_is_the_models_outcome_kept_not_paid_again(ws: Workspace, claw: Claw,
                                                                                    relay: Relay) -> None:
    """The prompt fits the server's context, but each turn adds the model's tool call and its result: after three
    answered turns the fourth request is over n_ctx (HTTP 400). The same conversation would overflow again, as a
    loop past max_turns would go on: the run is `incomplete`, kept; every build paid its three turns again."""
    ws.suite("main", ["tiny"], case_selection={"include_case_ids": ["case0"]})
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(
        requested_model="tiny", base_url=relay.base_url, api_key_env=KEY_ENV, pricing=PRICES))
    ws.edit("cases/case0/test.yaml", lambda d: d["input"]["messages"][0].update(content="Write. " * 240))
    ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(max_turns=8))
    code, out, err = claw.build("--output", "json")
    statuses = [e["status"] for e in relay.chats()]
    assert statuses[-1] == 400 and set(statuses[:-1]) == {200} and len(statuses) > 2, statuses
    assert "maximum context length" in json.dumps(relay.chats()[-1]["response"])
    [run] = records("run")
    assert (run.status, run.cacheable, run.error and run.error["code"]) == ("incomplete", True,
                                                                           "context_length_exceeded"), run
    answered = [e["response"]["usage"] for e in relay.chats()[:-1]]
    assert run.metrics.cost_source == "priced" and run.metrics.cost_usd == pytest.approx(priced(answered))
    assert code == 1 and json.loads(out)["counts"]["failed"] == 0, out + err
    sent = len(relay.chats())
    code, out, err = claw.build()
    assert code == 1 and len(relay.chats()) == sent, out + err  # (before: its answered turns paid again every build)
