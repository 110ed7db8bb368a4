"""No price is part of a paid node's key: editing a judge's `cost` (OpenClaw's name for `pricing`) re-asks no
judgement, and a store whose judgements were keyed with their judge's `cost` (claw before session 58) keeps them
(real `claw` processes, the stand-in server; the older claw is this repository's clawstore at its commit then). The
builds that only prepare, and the reads (query, report, fsck, gc) of what builds left, run in the test's own process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn, held
from tests.hostile.attack import CLAW, Outcome, run_claw
from tests.support.judging import JUDGE, eval_profile, judge_reply, judge_requests
from tests.support.oldclaw import old_claw, old_clawstore, runs_keyed_alike
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


def _judge_cost(ws: Workspace, prices: dict[str, float]) -> None:
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(cost=prices))


def _build(ws: Workspace, run: Callable[..., Outcome] = run_claw) -> None:
    """This claw's build of the campaign (`run=run_here`: in this process, for a build that only prepares the one a
    test is about)."""
    built = run(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built


def _built_by_the_older_claw(ws: Workspace, standin: StandIn, tmp_path: Path) -> int:
    """The campaign built by the claw before session 58 with the judge's `cost` in its keys (4 judgements asked); the
    stand-in's request count after it."""
    old = old_clawstore(tmp_path / "old")
    eval_profile(ws, repetitions=1)
    _judge_cost(ws, {"input": 1.0, "output": 4.0})
    standin.script(JUDGE, judge_reply(7))
    built = old_claw(old, ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    assert judge_requests(standin) == 4
    return len(standin.requests)


def test_editing_a_judges_cost_re_asks_no_judgement(ws: Workspace, standin: StandIn) -> None:
    eval_profile(ws, repetitions=1)
    _judge_cost(ws, {"input": 1.0, "output": 4.0})
    standin.script(JUDGE, judge_reply(7))
    _build(ws, run_here)
    assert judge_requests(standin) == 4
    sent = len(standin.requests)
    _judge_cost(ws, {"input": 2.0, "output": 8.0})
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]  # (before: 4 judge requests again)


def test_a_store_keyed_with_the_judges_cost_keeps_its_judgements(ws: Workspace, standin: StandIn,
                                                                 tmp_path: Path) -> None:
    sent = _built_by_the_older_claw(ws, standin, tmp_path)
    _build(ws)  # this claw: the judgements are found under the key they were stored by
    assert len(standin.requests) == sent, standin.requests[sent:]
    report = run_here(ws.root, "report", *CAMPAIGN, "--no-chart", "--output", "json")
    assert report.code == 0 and "Traceback" not in report.stderr, report
    _build(ws)  # and again (the head names them under that key)
    assert len(standin.requests) == sent, standin.requests[sent:]


def test_a_judge_without_cost_keeps_its_judgements(ws: Workspace, standin: StandIn, tmp_path: Path) -> None:
    # a judge that declares no `cost` (and `pricing`, never in a key) nor a setting that left the key in session 75
    # (`retries`: tests/spend/test_judge_settings_not_in_key.py) has no legacy key: its judgements were under the
    # key this claw gave them until session 76, whose key left out the judge's `type` (every judge's: its judgements
    # are found under the key they had, Node.earlier, and recorded under the key now, which the head names)
    old = old_clawstore(tmp_path / "old")
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(pricing={"input": 1.0, "output": 4.0}))
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].pop("retries"))
    standin.script(JUDGE, judge_reply(7))
    built = old_claw(old, ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    old_keys = run_here(ws.root, "query", "select key from judgements order by key", "--format", "csv")
    sent = len(standin.requests)
    _build(ws)
    assert len(standin.requests) == sent and judge_requests(standin) == 4
    new_keys = run_here(ws.root, "query", "select key from judgements order by key", "--format", "csv")
    assert old_keys.code == new_keys.code == 0, (old_keys, new_keys)
    old_rows, new_rows = old_keys.stdout.split()[1:], new_keys.stdout.split()[1:]
    assert len(old_rows) == len(new_rows) == 4 and not set(old_rows) & set(new_rows), (old_keys, new_keys)


def test_a_store_keyed_with_the_judges_cost_keeps_its_judgements_through_a_price_edit(
        ws: Workspace, standin: StandIn, tmp_path: Path) -> None:
    # the first build after the upgrade reuses them under the key they were stored by and records them under their key
    # now as well: the next price edit (which changes the old key) finds them (before: 4 judge requests again, once)
    sent = _built_by_the_older_claw(ws, standin, tmp_path)
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]
    before = _costs(ws)
    checked = run_here(ws.root, "fsck")  # the records under the new keys are whole entries: their key, their input
    assert checked.code == 0, checked
    _judge_cost(ws, {"input": 2.0, "output": 8.0})
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]
    _judge_cost(ws, {"input": 3.0, "output": 9.0})
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]
    assert _costs(ws) == before  # what was paid, as the old claw recorded it (the price in force then)


def test_a_gc_between_the_upgrade_and_a_price_edit_keeps_the_judgements_found_under_the_old_key(
        ws: Workspace, standin: StandIn, tmp_path: Path) -> None:
    # the record a build copied under the key now is kept by gc: what the head names reaches it (before: gc deleted the
    # copy, which no head named, and the price edit after it asked the 4 judgements again)
    sent = _built_by_the_older_claw(ws, standin, tmp_path)
    _build(ws)
    collected = run_here(ws.root, "gc", "--grace", "0s")
    assert collected.code == 0 and "Traceback" not in collected.stderr, collected
    _judge_cost(ws, {"input": 2.0, "output": 8.0})
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]


def _costs(ws: Workspace) -> str:
    done = run_here(ws.root, "query", "select kind, cost_usd, cost_source from nodes where kind = 'judge' order by "
                    "case_id, model_id", "--format", "csv")
    assert done.code == 0, done
    return done.stdout


@pytest.mark.parametrize("first", ["old", "new"])
def test_the_older_claw_building_beside_this_one_pays_each_judgement_once(ws: Workspace, standin: StandIn,
                                                                          tmp_path: Path, first: str) -> None:
    # the two claws key a judgement of a judge with `cost` differently: each must meet the other's claim (this claw
    # claims both keys) and find the other's record (this claw records under both), or both ask the judge
    old = old_clawstore(tmp_path / "old")
    runs_keyed_alike(ws.configs)
    eval_profile(ws, repetitions=1)
    _judge_cost(ws, {"input": 1.0, "output": 4.0})
    built = run_here(ws.root, "build", "--suite", "main", "--run-profile", "rp")  # the runs (one key in both claws)
    assert built.code == 0, built
    standin.script(JUDGE, held("judges", **judge_reply(7)))
    old_env = {**os.environ, "PYTHONPATH": str(old)}
    commands = {"old": ([sys.executable, "-m", "clawstore.cli"], old_env), "new": ([CLAW], dict(os.environ))}
    order = [first, "new" if first == "old" else "old"]
    builds: list[subprocess.Popen[str]] = []
    in_flight = 0
    try:
        for which in order:
            argv, env = commands[which]
            builds.append(subprocess.Popen([*argv, "build", *CAMPAIGN], cwd=ws.root, env=env, text=True,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            if which == first:
                _wait_for(lambda: judge_requests(standin) >= 1, 120)  # the first build's judgements in flight
                time.sleep(0.5)
                in_flight = judge_requests(standin)
        # the second asks again (paid twice), or asks what the first has not claimed, or waits for the first's claims
        _wait_for(lambda: judge_requests(standin) > in_flight, 10, fail=False)
        standin.release("judges")
        outs = [build.communicate(timeout=180) for build in builds]
    finally:
        standin.release("judges")
        for build in builds:
            if build.poll() is None:
                build.kill()
    for build, (out, err) in zip(builds, outs, strict=True):
        assert build.returncode == 0 and "Traceback" not in err, out + err
    assert judge_requests(standin) == 4
    sent = len(standin.requests)
    _build(ws)  # and this claw's next build reuses all of them
    assert len(standin.requests) == sent
    rebuilt = old_claw(old, ws.root, "build", *CAMPAIGN)  # and the older claw's
    assert rebuilt.returncode == 0 and len(standin.requests) == sent, rebuilt.stdout + rebuilt.stderr


def _wait_for(done: Callable[[], bool], seconds: float, fail: bool = True) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            assert not fail, f"not within {seconds} s"
            return
        time.sleep(0.05)
