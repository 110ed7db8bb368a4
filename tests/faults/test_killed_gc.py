"""A SIGKILLed build's finished, paid work survives a `claw gc` run after the grace period: its log's journal names
every node it recorded, and gc keeps those records (and their action-cache entries) until a later build of the
campaign has ended, having adopted them into its head. Before session 76 a gc more than an hour (`--grace`) after the
kill deleted them, and the next build paid for every one again (real `claw` processes, SIGKILL, the stand-in)."""

from __future__ import annotations

import json
from pathlib import Path

from clawstore.store.buildlogs import read_journal
from clawstore.testing.standin import StandIn, text
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.killing import build_killed_when
from tests.support.prepared import run_here
from tests.support.workspace import many_cases

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
CASES = 12  # x two models: 24 runs


def _killed_cold_build(ws_root: Path, standin: StandIn, *flags: str) -> list[dict]:
    """A build of the campaign SIGKILLed once its log counts three runs recorded; its journal's nodes."""
    journal = build_killed_when(ws_root, [*CAMPAIGN, *flags],
                                lambda logged: logged is not None and logged.executed >= 3,
                                lambda: f"{len(standin.requests)} sent")
    return read_journal(journal)


def test_a_gc_after_the_grace_period_keeps_what_a_killed_build_paid_for(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    ws = many_cases(tmp_path / "ws", CASES, concurrency=2)
    standin.set_default(text("four", latency=0.3))
    nodes = _killed_cold_build(ws.root, standin)
    paid = [n for n in nodes if n.get("kind") == "run" and n.get("record")]
    assert len(paid) >= 3, nodes

    gc = run_here(ws.root, "gc", "--grace", "0")  # (as an hour later: nothing is young any more)
    assert gc.code == 0, gc
    standin.set_default(text("four"))
    before = len(standin.requests)
    rebuilt = run_here(ws.root, "build", *CAMPAIGN)
    assert rebuilt.code == 0, rebuilt
    asked = len(standin.requests) - before
    assert asked <= 2 * CASES - len(paid), (asked, len(paid))  # (none of what the killed build recorded again)

    # Once a build of the campaign has ended, its head names them: a gc no longer needs the killed log to keep them.
    assert run_here(ws.root, "gc", "--grace", "0").code == 0
    again = len(standin.requests)
    assert run_here(ws.root, "build", *CAMPAIGN, "--dry-run").code == 0
    final = run_here(ws.root, "build", *CAMPAIGN)
    assert final.code == 0 and len(standin.requests) == again, final


def test_retiring_the_campaign_lets_gc_reclaim_what_its_killed_build_recorded(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    """Kept until a build of the campaign adopts them, and no build of a retired campaign comes: `claw refs --delete`
    of its head tells its killed builds, and a gc then reclaims what they recorded."""
    ws = many_cases(tmp_path / "ws", CASES, concurrency=2)
    standin.set_default(text("four"))
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    [head] = [name for name in json.loads(run_here(ws.root, "refs", "--json").stdout) if name.startswith("campaigns/")]
    standin.set_default(text("four", latency=0.3))
    nodes = _killed_cold_build(ws.root, standin, "--force")
    records = [n["record"] for n in nodes if n.get("kind") == "run" and n.get("record")]
    assert records, nodes

    assert run_here(ws.root, "gc", "--grace", "0").code == 0
    assert all(run_here(ws.root, "cat", record).code == 0 for record in records)  # (kept: no build adopted them)
    assert run_here(ws.root, "refs", "--delete", head).code == 0
    assert run_here(ws.root, "gc", "--grace", "0").code == 0
    assert not any(run_here(ws.root, "cat", record).code == 0 for record in records)


def test_a_filtered_build_does_not_let_gc_reclaim_what_a_killed_build_paid_for_outside_its_filter(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    """A `--model` build adopts only its model's records into the head: the killed build's runs of the other model
    stay gc roots (its log is not told of) until a build of the whole campaign has ended. Before the session 76 review
    the filtered build told of it, and a gc then deleted the other model's runs, paid for again by the next build."""
    ws = many_cases(tmp_path / "ws", CASES, concurrency=2)
    standin.set_default(text("four", latency=0.3))
    nodes = _killed_cold_build(ws.root, standin)
    paid = [n for n in nodes if n.get("kind") == "run" and n.get("record")]
    assert paid, nodes
    left_out = paid[0]["address"]["model_id"]  # the model the filtered build does not build
    kept = [n["record"] for n in paid if n["address"]["model_id"] == left_out]
    other = {"m1": "m2", "m2": "m1"}[left_out]

    standin.set_default(text("four"))
    assert run_here(ws.root, "build", *CAMPAIGN, "--model", other).code == 0
    assert run_here(ws.root, "gc", "--grace", "0").code == 0
    assert all(run_here(ws.root, "cat", record).code == 0 for record in kept), kept
    before = len(standin.requests)
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert len(standin.requests) - before <= CASES - len(kept)  # (none of the killed build's runs asked again)
