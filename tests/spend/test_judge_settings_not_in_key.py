"""A judge's harness settings are in no judgement's key: `timeout_seconds` and `retries` (how long claw waits for the
judge and how often it asks again) and `api_key_env` (which variable holds the key; the endpoint's base URL is in the
key) change nothing the judge is asked or answers, so editing them re-asks no judgement; a store whose judgements were
keyed with them (claw before session 75; before session 58 with the judge's `cost` too) keeps its judgements (real
`claw` processes for the builds a test is about, the stand-in server; the older claw is this repository's clawstore at
its commit then)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import batch_doc
from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.hostile.attack import Outcome, run_claw
from tests.support.judging import JUDGE, eval_profile, judge_reply, judge_requests
from tests.support.oldclaw import KEYED_WITH_JUDGE_SETTINGS, KEYED_WITH_PRICES, old_claw, old_clawstore
from tests.support.prepared import run_here
from tests.support.workspace import SECRET, Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


def _judge(ws: Workspace, **fields: Any) -> None:
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(fields))


def _build(ws: Workspace, run: Callable[..., Outcome] = run_claw) -> None:
    built = run(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built


def _judged(ws: Workspace, standin: StandIn, monkeypatch: pytest.MonkeyPatch, **fields: Any) -> None:
    """The campaign's judge (one repetition) with the harness settings of a user who tuned them, and its key."""
    monkeypatch.setenv("JUDGE_KEY_A", SECRET)
    monkeypatch.setenv("JUDGE_KEY_B", SECRET)
    eval_profile(ws, repetitions=1)
    _judge(ws, timeout_seconds=30, retries=1, api_key_env="JUDGE_KEY_A", **fields)
    standin.script(JUDGE, judge_reply(7))


EDITS: dict[str, dict[str, Any]] = {
    "timeout_seconds": {"timeout_seconds": 300},
    "retries": {"retries": 5},
    "api_key_env": {"api_key_env": "JUDGE_KEY_B"},
    "all three left out": {"timeout_seconds": None, "retries": None, "api_key_env": None},
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_editing_a_judges_harness_settings_re_asks_no_judgement(ws: Workspace, standin: StandIn,
                                                                 monkeypatch: pytest.MonkeyPatch, edit: str) -> None:
    _judged(ws, standin, monkeypatch)
    _build(ws, run_here)
    assert judge_requests(standin) == 4
    sent = len(standin.requests)
    changes = EDITS[edit]
    ws.edit("evaluation_profiles/ev.yaml", lambda d: [
        d["judges"][0].pop(k) if v is None else d["judges"][0].update({k: v}) for k, v in changes.items()])
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]  # (before: the 4 judgements asked again)


@pytest.mark.parametrize("written", ["{url}", "{url}/", " {url}/ "])
def test_the_judges_endpoint_written_another_way_re_asks_no_judgement(
        ws: Workspace, standin: StandIn, monkeypatch: pytest.MonkeyPatch, written: str) -> None:
    """The key covers where the judge is asked by its endpoint's base URL as claw calls it; the `base_url` as written
    (the default's written out, a trailing `/`, blanks) was in it too, and asked every judgement again."""
    _judged(ws, standin, monkeypatch)
    _build(ws, run_here)
    assert judge_requests(standin) == 4
    sent = len(standin.requests)
    _judge(ws, base_url=written.format(url=standin.base_url))
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]  # (before: the 4 judgements asked again)


def _built_by(commit: str, ws: Workspace, standin: StandIn, tmp_path: Path, *extra: str) -> int:
    """The campaign built by the claw at `commit` (its judge's harness settings in its judgements' keys); the stand-in's
    request count after it."""
    built = old_claw(old_clawstore(tmp_path / "old", commit), ws.root, "build", *CAMPAIGN, *extra)
    assert built.returncode == 0, built.stdout + built.stderr
    return len(standin.requests)


@pytest.mark.parametrize("commit", [KEYED_WITH_JUDGE_SETTINGS, KEYED_WITH_PRICES])
def test_a_store_keyed_with_the_judges_settings_keeps_its_judgements_through_edits_and_a_gc(
        ws: Workspace, standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, commit: str) -> None:
    """Built by the claw before session 75 (the settings and the `base_url` as written in the key, and a rubric the
    prompt does not show), or before 58 (the judge's `cost` too): this claw reuses the judgements under the key they
    had and records them under its own, which a gc keeps (the head names them) and which an edit of a setting (or of
    the price) leaves as it is."""
    _judged(ws, standin, monkeypatch, cost={"input": 1.0, "output": 4.0}, base_url=standin.base_url + "/")
    _unshown_rubric(ws)
    sent = _built_by(commit, ws, standin, tmp_path)
    assert judge_requests(standin) == 4
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]  # (before: 4 judge requests again)
    collected = run_here(ws.root, "gc", "--grace", "0s")
    assert collected.code == 0 and "Traceback" not in collected.stderr, collected
    _judge(ws, timeout_seconds=300, retries=4, api_key_env="JUDGE_KEY_B")
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]
    _judge(ws, cost={"input": 2.0, "output": 8.0})
    _build(ws, run_here)
    assert len(standin.requests) == sent, standin.requests[sent:]


@pytest.mark.parametrize("priced", [False, True])
def test_a_judge_batch_the_claw_before_submitted_is_collected_not_sent_again(
        ws: Workspace, standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, priced: bool) -> None:
    """Judgements the claw before session 75 submitted by provider batch, keyed with the judge's settings, pending when
    this claw builds: collected under that key, not asked again (one by one or in a second batch). `priced`: the user
    declares the judge's price meanwhile, so the judge has a legacy key too (before session 58), under which no batch
    stands: the batch is found all the same (before the review of session 75 the 4 judgements were asked again)."""
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    _judged(ws, standin, monkeypatch)
    built = run_here(ws.root, "build", "--suite", "main", "--run-profile", "rp")  # the runs (one key in both claws)
    assert built.code == 0, built
    standin.batch_settings(delay=60)
    sent = _built_by(KEYED_WITH_JUDGE_SETTINGS, ws, standin, tmp_path, "--batch")
    assert standin.batch_stats()["lines"] == 4 and judge_requests(standin) == 0
    planned = run_here(ws.root, "plan", *CAMPAIGN, "--output", "json")  # (the batch is found under the earlier key:
    assert planned.code == 0, planned  # no request, no cost; before the review of session 75, 4 requests and a cost)
    assert {k: json.loads(planned.stdout)[k] for k in ("requests", "pending")} == {"requests": 0, "pending": 4}
    standin.batch_settings(delay=0)  # it finishes
    if priced:
        _judge(ws, cost={"input": 1.0, "output": 4.0})
    _build(ws)
    assert judge_requests(standin) == 0 and len(standin.requests) == sent, standin.requests[sent:]
    assert {k: standin.batch_stats()[k] for k in ("lines", "batches")} == {"lines": 4, "batches": 1}
    assert batch_doc.pending(Store(tmp_path / "store")) == []
    _judge(ws, timeout_seconds=300)
    _build(ws, run_here)  # and found under the key now
    assert judge_requests(standin) == 0 and standin.batch_stats()["lines"] == 4


def _unshown_rubric(ws: Workspace, low: int = 1) -> None:
    """A rubric on case beta that the judge's prompt does not show (a scale alone)."""
    ws.edit("cases/beta/test.yaml", lambda d: d.update(rubric={"scale": {"min": low, "max": 5}}))


def test_a_store_keyed_with_a_rubric_the_prompt_does_not_show_keeps_its_judgements(
        ws: Workspace, standin: StandIn, tmp_path: Path) -> None:
    """A judge with none of the settings (its part of the key unchanged), a case whose rubric the prompt does not show
    (in the key before session 75): the judgements are found under the key they had, then an edit of that rubric, a gc
    between, asks nothing (before: 2 judge requests for the same prompt, each edit)."""
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].pop("retries"))
    standin.script(JUDGE, judge_reply(7))
    _unshown_rubric(ws)
    sent = _built_by(KEYED_WITH_JUDGE_SETTINGS, ws, standin, tmp_path)
    assert judge_requests(standin) == 4
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]
    collected = run_here(ws.root, "gc", "--grace", "0s")
    assert collected.code == 0 and "Traceback" not in collected.stderr, collected
    _unshown_rubric(ws, low=2)
    _build(ws, run_here)
    assert len(standin.requests) == sent, standin.requests[sent:]
