"""SIGKILL a real `claw build` against the real llama.cpp server at the moments money is at stake, then build again.

A relay in front of the server (tests/realserver/relay.py) counts what claw sends, and holds the server's answer,
answers 429 with Retry-After in its place, or tells the test when an answer has left, so the kill lands: while a
request is in flight, just after an answer left (between the reply and its record), in a retry's back-off, while the
judge is asked. What holds after each: no answer durably recorded (a reusable record in the store when claw died) is
asked for again by the next build; the killed build is named, its spending never said to be 0; the server reports no
cost, so every total after is unknown (NULL, `?`), never 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.realserver.campaign import build, is_judge, judged_workspace, records
from tests.realserver.relay import HELD, RATE_LIMITED, SERVER_ERROR, TRUNCATED, Relay
from tests.support.claw import Claw
from tests.support.workspace import Workspace

CASES = {f"case{i}": f"Say hello to number {i}." for i in range(3)}
KILLED = "was killed before it finished"


@pytest.fixture
def claw(tmp_path: Path, relay: Relay, server_env: None, monkeypatch: pytest.MonkeyPatch) -> Claw:
    workspace = judged_workspace(tmp_path / "ws", relay.base_url, CASES, concurrency=1)
    monkeypatch.chdir(workspace.root)
    return Claw(workspace.root)


def asked(exchange: dict[str, Any]) -> tuple[str, str]:
    """(run or judge, case) an exchange asked for: the case's prompt is in both."""
    text = json.dumps(exchange["request"]["messages"])
    [case] = [case for case, prompt in CASES.items() if prompt in text]
    return ("judge" if is_judge(exchange) else "run", case)


def recorded() -> set[tuple[str, str]]:
    """(run or judge, case) of every reusable answer in the store."""
    return {(r.kind, r.address["case_id"]) for kind in ("run", "judge") for r in records(kind)
            if r.status == "success" and r.cacheable}


def killed_build(claw: Claw, relay: Relay, until: Callable[[], bool], after_s: float = 0.0) -> None:
    build_process = claw.popen("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    try:
        deadline = time.monotonic() + 60
        while not until() and time.monotonic() < deadline and build_process.poll() is None:
            time.sleep(0.01)
        if not until():  # (a build that ended first says why: its output, for a failure seen once under load)
            output = build_process.communicate(timeout=10) if build_process.poll() is not None else ("", "")
            raise AssertionError((relay.chats(), build_process.poll(), *output))
        time.sleep(after_s)
    finally:
        build_process.send_signal(signal.SIGKILL)
        build_process.wait()
    relay.release.set()  # (a held answer has nobody left to go to)


def kill_when_answered(relay: Relay, answers: int) -> Callable[[], bool]:
    """A moment: the `answers`-th answer has left the relay (its bytes written to claw)."""
    done: list[dict[str, Any]] = []
    relay.on_reply = lambda exchange: done.append(exchange)
    return lambda: len(done) >= answers


def held(relay: Relay, kind: str) -> Callable[[], bool]:
    return lambda: any(e["fault"] == HELD and is_judge(e) == (kind == "judge") for e in relay.chats())


def rebuild_asks_nothing_recorded(claw: Claw, relay: Relay) -> list[tuple[str, str]]:
    """After the kill: the killed build is named and never said to have spent 0; the next build asks for no answer
    the store held, and finishes; returns what it asked for."""
    code, out, err = claw("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    [note] = [line for line in err.splitlines() if KILLED in line] or [err]
    assert code == 0 and "spent an unknown amount" in note and "0.000000" not in note, (code, out, err)
    kept = recorded()  # (status adopted what the killed build made durable)
    relay.settle()  # the killed build's last request, still at the server, is the killed build's: not counted below
    before = len(relay.chats())
    relay.faults.clear()
    relay.on_reply = None
    code, report = build(claw)
    assert code == 0, report
    again = [asked(e) for e in relay.chats()[before:]]
    assert not set(again) & kept, (again, kept)  # paid twice
    assert sorted(set(again) | kept) == sorted((k, c) for k in ("run", "judge") for c in CASES)
    assert len(again) == len(set(again))
    assert report["metrics"]["cost_usd"] is None and report["metrics"]["cost_known_usd"] == 0, report["metrics"]
    return again


def test_killed_while_a_run_s_answer_is_in_flight(claw: Claw, relay: Relay) -> None:
    relay.faults[:] = [HELD]
    killed_build(claw, relay, lambda: any(e["fault"] == HELD for e in relay.chats()))
    code, out, err = claw("query", "select state, input_tokens, output_tokens, cost_usd, cost_known_usd from builds",
                          "--format", "json")
    # Its log was written before its first request, counting nothing: what it spent is unknown, not 0 tokens.
    assert code == 0 and json.loads(out) == [{"state": "running", "input_tokens": None, "output_tokens": None,
                                              "cost_usd": None, "cost_known_usd": None}], out + err
    [lost] = [asked(e) for e in relay.chats() if e["fault"] == HELD]
    assert lost in rebuild_asks_nothing_recorded(claw, relay)  # sent, lost: asked again


def test_killed_just_after_an_answer_left(claw: Claw, relay: Relay) -> None:
    killed_build(claw, relay, kill_when_answered(relay, 2))
    rebuild_asks_nothing_recorded(claw, relay)


def test_killed_in_a_retry_s_back_off(claw: Claw, relay: Relay) -> None:
    """The first answer recorded, then a 429 storm: Retry-After 30 s, killed 2 s into the wait."""
    relay.retry_after = "30"
    relay.faults[:] = ["", *[RATE_LIMITED] * 20]
    killed_build(claw, relay, lambda: any(e["fault"] == RATE_LIMITED for e in relay.chats()), after_s=2.0)
    assert ("run", "case0") in recorded()  # answered 2 s before the kill
    rebuild_asks_nothing_recorded(claw, relay)


def test_killed_while_the_judge_is_asked(claw: Claw, relay: Relay) -> None:
    relay.faults[:] = ["", "", "", HELD]  # the runs answered (concurrency 1: the runs first), a judgement held
    killed_build(claw, relay, lambda: any(e["fault"] == HELD for e in relay.chats()))
    assert [asked(e) for e in relay.chats() if e["fault"] == HELD] == [("judge", "case0")]
    rebuild_asks_nothing_recorded(claw, relay)


@pytest.mark.parametrize("fault", [TRUNCATED, SERVER_ERROR, RATE_LIMITED])
def test_a_fault_then_an_answer_is_counted_once_and_never_as_0(claw: Claw, relay: Relay, fault: str) -> None:
    """case0's run meets `fault` once, then its retry is answered. At declared prices: a truncated answer may have
    been billed (its cost unknown, `≥`), a 500 or 429 without usage adds nothing; a rebuild asks for nothing."""
    priced_at(claw, {"input": 1.0, "output": 2.0})
    relay.retry_after = "0"
    relay.faults[:] = [fault]
    code, report = build(claw)
    assert code == 0, report
    chats = relay.chats()
    assert [asked(e) for e in chats].count(("run", "case0")) == 2 and chats[0]["fault"] == fault
    by_case = {r.address["case_id"]: r.metrics for r in records("run")}
    answered = [e["response"]["usage"] for e in chats if e["fault"] is None and asked(e) == ("run", "case0")]
    if fault == TRUNCATED:
        assert by_case["case0"].cost_usd is None and by_case["case0"].input_tokens is None, by_case["case0"]
        assert report["metrics"]["cost_usd"] is None and report["metrics"]["cost_unknown"] == 4, report["metrics"]
    else:
        assert by_case["case0"].input_tokens == answered[0]["prompt_tokens"], (by_case["case0"], answered)
        assert by_case["case0"].cost_source == "priced" and by_case["case0"].cost_usd > 0
        assert report["metrics"]["cost_unknown"] == 3, report["metrics"]  # (the judge declares no pricing)
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                          "--output", "json")
    totals = json.loads(out)["totals"]
    assert code == 0 and totals["total_cost_usd"] is None and totals["known_cost_usd"] > 0, out + err
    before = len(relay.chats())
    assert build(claw)[0] == 0 and len(relay.chats()) == before


def test_killed_the_moment_a_run_is_reported_done(claw: Claw, relay: Relay) -> None:
    """Durable before reported: once the progress says a run finished, a SIGKILL cannot lose its answer."""
    reported: list[str] = []
    build_process = subprocess.Popen(
        [sys.executable, "-m", "clawstore.cli", "build", "--suite", "main", "--run-profile", "rp",
         "--evaluation-profile", "ev", "--progress", "plain"], cwd=claw.root, env=dict(os.environ),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert build_process.stderr is not None
        for line in build_process.stderr:
            done = re.match(r"\[runs \d+/\d+\] run/tiny/(case\d)/0: success", line)
            if done:
                build_process.send_signal(signal.SIGKILL)
                reported.append(done.group(1))
                break
    finally:
        build_process.kill()
        build_process.wait()
    assert reported, "no run reported done"
    code, _, err = claw("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert code == 0, err
    assert ("run", reported[0]) in recorded()
    assert ("run", reported[0]) not in rebuild_asks_nothing_recorded(claw, relay)


def priced_at(claw: Claw, prices: dict[str, float]) -> None:
    Workspace(claw.root).edit("suites/main.yaml", lambda d: d["models"][0].update(pricing=prices))


def test_max_cost_starts_nothing_once_a_cost_is_unknown(claw: Claw, relay: Relay) -> None:
    """Every run's first answer cut in half, its retry answered: each cost is unknown (the cut one may have been
    billed). --max-cost counts what is known; were an unknown cost taken for 0, the limit would never be reached."""
    priced_at(claw, {"input": 100.0, "output": 400.0})
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0, err
    limit = f"{json.loads(out)['estimated_cost_usd'] * 1.01:.6f}"  # the plan fits
    relay.faults[:] = [TRUNCATED, ""] * len(CASES)
    code, out, err = claw.build("--max-cost", limit)
    asked_runs = {asked(e)[1] for e in relay.chats()}
    assert code == 1 and "stopped: --max-cost" in out + err, out + err
    assert len(asked_runs) == 1, (asked_runs, out + err)  # the first cost unknown: no other run started
    assert "--max-cost" in out + err and "cannot be kept: a cost spent is unknown" in out + err, out + err
