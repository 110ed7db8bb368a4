"""`status`, `explain`, `build --dry-run` and `plan` of a campaign whose every node is stale (its provider's URL
edited after the build, as after an edit of a model, a judge or a provider): what they print is what the whole plan
with every node's reasons prints, and the commands that print no reasons (`status`, `plan`) diff no input document
(a stale run's reasons read its last build's document from the store and diff it: most of such a plan's time).

Real in-process `claw` commands on a workspace built against the stand-in provider; the stamps are removed so that
every command plans (the environment changed: no stamp answers anyway).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import click
import pytest

from clawstore.builder import api
from clawstore.builder.stamp import STAMPS_DIR
from clawstore.graph import explain
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.stamps import stampless_answers
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
COMMANDS = [("status",), ("explain",), ("build", "--dry-run"), ("plan",)]


def _stale(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight cases (the standard workspace's two and six) × two models × two repetitions, judged twice, built; then
    the provider's URL moved (every run's key changes: every node is stale)."""
    for index in range(6):
        ws.case(f"c{index:02d}", f"Question {index}: " + "word " * (index + 1))
    ws.suite("main", ["m1", "m2"])
    ws.run_profile(repetitions=2, concurrency=4)
    eval_profile(ws, repetitions=2)
    for model in ("m1", "m2"):
        standin.script(f"vendor/{model}", *[text("answer " * (n % 7 + 1)) for n in range(40)])
    standin.script(JUDGE, *[judge_reply(float(n % 9)) for n in range(200)])
    code, _, err = claw.build(*CAMPAIGN[4:], "--output", "json")
    assert code == 0, err
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{standin.url}/moved/v1")


def _answers(claw: Claw, store: Path, commands: list[tuple[str, ...]] = COMMANDS) -> list[tuple[int, str, str]]:
    """Each command's (exit code, stdout, stderr), text and JSON, none answered by a stamp."""
    return stampless_answers(claw, store, commands, CAMPAIGN)


def test_read_commands_of_a_stale_campaign_print_what_the_reasoned_plan_prints(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    _stale(ws, claw, standin, monkeypatch)
    sent = len(standin.requests)
    fast = _answers(claw, store)
    inspect_windows = api.inspect_windows

    def reasoned(*args: Any, **kwargs: Any) -> Any:  # every node's reasons made, as before
        return inspect_windows(*args, **{**kwargs, "reasoned": True})

    monkeypatch.setattr(api, "inspect_windows", reasoned)
    assert _answers(claw, store) == fast
    assert len(standin.requests) == sent  # (nothing sent)
    status, explained, plan = fast[0][1], fast[2][1], fast[6][1]
    assert "m1     run     0      16     0       0" in status, status
    assert "model.endpoint.base_url" in explained and "/moved/v1" in explained, explained
    assert "plan main__rp__ev: 96 request(s)" in plan, plan


def test_status_and_plan_of_a_stale_campaign_diff_no_input_document(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    _stale(ws, claw, standin, monkeypatch)
    diffed: list[str] = []
    diff_documents = explain.diff_documents

    def counted(old: Any, new: Any, *args: Any, **kwargs: Any) -> list[str]:
        diffed.append(new.get("kind") if isinstance(new, dict) else "?")
        return diff_documents(old, new, *args, **kwargs)

    monkeypatch.setattr(explain, "diff_documents", counted)
    for code, _, err in _answers(claw, store, [("status",), ("plan",)]):
        assert code == 0, err
    assert diffed == []
    code, _, err = claw("explain", *CAMPAIGN)  # (the runs' reasons: each a diff)
    assert code == 0, err
    assert diffed and set(diffed) == {"run"}, diffed


def test_explain_and_dry_run_of_a_stale_campaign_write_their_lines_in_blocks(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    # A line a write (and a flush: click.echo's) was 400,000 writes for `explain` at 10,000 × 5: the same text in
    # blocks of ROWS_PER_WRITE lines.
    store = Path(env["CLAW_STORE"])
    _stale(ws, claw, standin, monkeypatch)
    echoed: list[str] = []
    echo = click.echo

    def counted(message: Any = None, *args: Any, **kwargs: Any) -> None:
        echoed.append(str(message))
        echo(message, *args, **kwargs)

    monkeypatch.setattr(click, "echo", counted)
    for command in [("explain",), ("build", "--dry-run")]:
        shutil.rmtree(store / STAMPS_DIR, ignore_errors=True)
        echoed.clear()
        code, out, err = claw(*command, *CAMPAIGN)
        assert code == 0, err
        assert out.count("\n") >= 128 and len(echoed) <= 3, (command, len(echoed))
        assert "".join(line + "\n" for line in echoed) == out
