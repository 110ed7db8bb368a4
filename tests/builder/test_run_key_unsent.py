"""What an llm_probe run does not send is in no run's key: the `turns` of an llm_probe case (the runner sends
`input.messages` alone; `claw validate` says so, and a user who then removes the turns paid for every run of the case
again) and the metadata a `source:` file's message carries (keys beside role, content and name: kept in the trace,
never sent). A store built by an older claw (its run keys held them) keeps its runs. Real `claw` processes for the
builds a test is about, the stand-in server; the older claws are this repository's clawstore at their commits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from tests.hostile.attack import Outcome, run_claw
from tests.support.judging import JUDGE, eval_profile, judge_reply, judge_requests
from tests.support.oldclaw import KEYED_WITH_HARNESS_SETTINGS, KEYED_WITH_JUDGE_SETTINGS, old_claw, old_clawstore
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
MESSAGES = [{"role": "user", "content": "Name a colour."}]


def _build(ws: Workspace, run: Callable[..., Outcome] = run_claw, *extra: str) -> None:
    built = run(ws.root, "build", *CAMPAIGN, *extra)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built


def _subject_requests(standin: StandIn) -> int:
    return sum(1 for r in standin.requests if r["model"] != JUDGE)


def _turns(ws: Workspace, turns: list[dict[str, Any]]) -> None:
    ws.edit("cases/beta/test.yaml", lambda d: d.update(input={"messages": MESSAGES, "turns": turns}))


TURNS = [{"role": "user", "content": "And now in French?"}]


def test_removing_an_llm_probe_cases_turns_runs_nothing_again(ws: Workspace, standin: StandIn) -> None:
    """The turns the warning says are not sent, removed (or edited): the runs are the same requests (before: both runs
    of the case again, paid). The judge is shown the turns: its judgements are asked again."""
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(7))
    _turns(ws, TURNS)
    _build(ws, run_here, "--evaluation-profile", "ev")
    assert _subject_requests(standin) == 4 and judge_requests(standin) == 4
    _turns(ws, [{"role": "user", "content": "And in German?"}])
    _build(ws, run_claw, "--evaluation-profile", "ev")
    assert _subject_requests(standin) == 4 and judge_requests(standin) == 6  # (the judge is shown them)
    _turns(ws, [])
    _build(ws, run_claw, "--evaluation-profile", "ev")
    assert _subject_requests(standin) == 4 and judge_requests(standin) == 8


@pytest.mark.parametrize("commit", [KEYED_WITH_JUDGE_SETTINGS, KEYED_WITH_HARNESS_SETTINGS])
def test_a_store_keyed_with_an_llm_probe_cases_turns_keeps_its_runs(ws: Workspace, standin: StandIn,
                                                                    tmp_path: Path, commit: str) -> None:
    """Built by the claw before session 75 (the turns in the run key), or before 74 (the run profile's
    `timeout_seconds` and `retries` too): this claw finds the runs under the key they had, and records them under its
    own, which a gc keeps and an edit of the turns leaves as it is."""
    _turns(ws, TURNS)
    built = old_claw(old_clawstore(tmp_path / "old", commit), ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _subject_requests(standin) == 4
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    collected = run_here(ws.root, "gc", "--grace", "0s")
    assert collected.code == 0 and "Traceback" not in collected.stderr, collected
    _turns(ws, [])
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]


def _noted(ws: Workspace, note: str, name: str = "prompt.yaml") -> None:
    """Case beta's message from a `source:` file whose mapping carries a key beside role and content (its metadata)."""
    beta = ws.configs / "cases" / "beta"
    for old in beta.glob("prompt*.yaml"):
        old.unlink()
    (beta / name).write_text(f"role: user\ncontent: Name a colour.\nnote: {note}\n")
    ws.edit("cases/beta/test.yaml", lambda d: d.update(input={"messages": [{"role": "user", "source": {
        "path": name}}]}))


def test_editing_a_source_messages_metadata_runs_nothing_again(ws: Workspace, standin: StandIn) -> None:
    """The metadata is kept in the run's trace, never sent nor shown to the judge: editing it sends nothing (before:
    both runs of the case again). Renaming the file (the same contents) sent nothing before either."""
    _noted(ws, "first draft")
    _build(ws, run_here)
    assert _subject_requests(standin) == 4
    sent = [m for r in standin.requests for m in r["body"]["messages"]]
    assert sent and all(set(m) == {"role", "content"} for m in sent), sent  # (what the provider was sent)
    _noted(ws, "first draft", name="prompt-renamed.yaml")
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    _noted(ws, "reviewed", name="prompt-renamed.yaml")
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]


@pytest.mark.parametrize(("commit", "turns"), [(KEYED_WITH_JUDGE_SETTINGS, False), (KEYED_WITH_HARNESS_SETTINGS, True)])
def test_a_store_keyed_with_a_messages_metadata_keeps_its_runs(ws: Workspace, standin: StandIn, tmp_path: Path,
                                                               commit: str, turns: bool) -> None:
    """Built by the claw before session 75, or before 74: the runs of a case whose message carries metadata (and
    `turns`: both left the run key in session 75), found under the key they had, then a metadata edit sends nothing."""
    _noted(ws, "first draft")
    if turns:
        ws.edit("cases/beta/test.yaml", lambda d: d["input"].update(turns=TURNS))
    built = old_claw(old_clawstore(tmp_path / "old", commit), ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _subject_requests(standin) == 4
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    _noted(ws, "reviewed")
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]


def _unread(ws: Workspace, value: float | None) -> None:
    """A runner setting the llm_probe runner does not read (`frequency_penalty`), set in the run profile, or removed."""
    ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].pop("frequency_penalty", None) if value is None
            else d["runner_defaults"].update(frequency_penalty=value))


def test_a_runner_setting_llm_probe_does_not_send_runs_nothing_again(ws: Workspace, standin: StandIn) -> None:
    """Set, edited or removed: the same requests (before: every run of the campaign again, paid)."""
    _unread(ws, 0.5)
    _build(ws, run_here)
    assert _subject_requests(standin) == 4
    assert not any("frequency_penalty" in r["body"] for r in standin.requests)  # (never sent)
    _unread(ws, 1.0)
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    _unread(ws, None)
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]


@pytest.mark.parametrize("commit", [KEYED_WITH_JUDGE_SETTINGS, KEYED_WITH_HARNESS_SETTINGS])
def test_a_store_keyed_with_a_runner_setting_llm_probe_does_not_send_keeps_its_runs(
        ws: Workspace, standin: StandIn, tmp_path: Path, commit: str) -> None:
    _unread(ws, 0.5)
    built = old_claw(old_clawstore(tmp_path / "old", commit), ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _subject_requests(standin) == 4
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    _unread(ws, None)
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]


def test_the_settings_in_a_runs_key_are_those_the_runner_reads() -> None:
    """What an llm_probe run's key keeps of its settings (graph/keys.py) is what the runner reads of them
    (runners/llm_probe.py `ExecutionParameters`) but the harness's own: a setting the runner comes to read must enter
    the key, or runs with another value of it would be reused."""
    import dataclasses

    from clawstore.config.models.runner_settings import RECOGNISED_SETTINGS
    from clawstore.graph.keys import _LLM_PROBE_SETTINGS_NOT_IN_KEY, LLM_PROBE_SETTINGS_IN_KEY
    from clawstore.runners.llm_probe import ExecutionParameters

    read = {f.name for f in dataclasses.fields(ExecutionParameters)}
    assert LLM_PROBE_SETTINGS_IN_KEY == read - _LLM_PROBE_SETTINGS_NOT_IN_KEY
    assert set(RECOGNISED_SETTINGS) == read  # (those `claw validate` checks: docs/configuration.md)


def _tool_loop(ws: Workspace, **settings: Any) -> None:
    ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(settings))


def test_the_tool_loop_settings_of_a_run_without_tools_run_nothing_again(ws: Workspace, standin: StandIn) -> None:
    """`max_turns` and `tool_choice` are read by a run with tools only: without them llm_probe sends one request and
    takes its answer, and sends no `tool_choice`. Raising `max_turns` after a tool loop ran out re-runs the runs with
    tools (case alpha's 2), not the others (before: beta's 2 too, the same requests paid again)."""
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(context={"llm_probe": {"tools": ["read_file"]}}))
    _tool_loop(ws, max_turns=4)
    _build(ws, run_here)
    assert _subject_requests(standin) == 4
    _tool_loop(ws, max_turns=12, tool_choice="required")
    _build(ws)
    assert _subject_requests(standin) == 6, standin.requests[4:]
    assert {r["body"]["messages"][-1]["content"] for r in standin.requests[4:]} == {"What is 2 + 2?"}  # (alpha's)


def test_a_store_keyed_with_the_tool_loop_settings_of_a_run_without_tools_keeps_its_runs(
        ws: Workspace, standin: StandIn, tmp_path: Path) -> None:
    _tool_loop(ws, max_turns=4)
    built = old_claw(old_clawstore(tmp_path / "old", KEYED_WITH_JUDGE_SETTINGS), ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _subject_requests(standin) == 4
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    _tool_loop(ws, max_turns=6)
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]


CASE_EDITS: dict[str, tuple[Callable[[dict[str, Any]], Any], Callable[[dict[str, Any]], Any]]] = {
    # the case's `metadata` ("not used by the framework"): set, then edited
    "metadata": (lambda d: d.update(metadata={"owner": "ana"}), lambda d: d.update(metadata={"owner": "bo"})),
    # another runner's hints in `input.context` (an llm_probe run reads its own part, the tools, alone)
    "context": (lambda d: d["input"].update(context={"openclaw": {"expected_artifact": "a.md"}}),
                lambda d: d["input"].update(context={"openclaw": {"expected_artifact": "b.md"}})),
}


@pytest.mark.parametrize("field", list(CASE_EDITS))
def test_what_an_llm_probe_run_does_not_read_of_its_case_runs_nothing_again(ws: Workspace, standin: StandIn,
                                                                            field: str) -> None:
    """Set, then edited: the same requests (before session 75's review: both runs of the case again, paid)."""
    first, then = CASE_EDITS[field]
    _build(ws, run_here)
    assert _subject_requests(standin) == 4
    ws.edit("cases/beta/test.yaml", first)
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    ws.edit("cases/beta/test.yaml", then)
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]


@pytest.mark.parametrize("field", list(CASE_EDITS))
def test_a_store_keyed_with_what_an_llm_probe_run_does_not_read_keeps_its_runs(
        ws: Workspace, standin: StandIn, tmp_path: Path, field: str) -> None:
    """Built by the claw before session 75 (the case's metadata and whole context in the run key): this claw finds the
    runs under the key they had; an edit then sends nothing."""
    first, then = CASE_EDITS[field]
    ws.edit("cases/beta/test.yaml", first)
    built = old_claw(old_clawstore(tmp_path / "old", KEYED_WITH_JUDGE_SETTINGS), ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _subject_requests(standin) == 4
    _build(ws)
    assert _subject_requests(standin) == 4, standin.requests[4:]
    ws.edit("cases/beta/test.yaml", then)
    _build(ws, run_here)
    assert _subject_requests(standin) == 4, standin.requests[4:]
