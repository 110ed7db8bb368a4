"""Edits of what the judge never sees re-ask no judgement: a rubric's whitespace the judge's prompt normalises (line
endings, blanks ending a line, blank lines before or after a text: the prompt shows the text without them, and a
judgement's key holds the rubric as shown) and the judge's `type` (claw's own label, never sent nor read). An edit
the judge does see (a space inside a line) re-asks it. A store the claw before built (main of session 76's start: both
in its keys) keeps its judgements. Real `claw` processes, the stand-in server; the older claw is this repository's
clawstore at its commit then."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.hostile.attack import run_claw
from tests.support.judging import JUDGE, eval_profile, judge_reply, judge_requests
from tests.support.oldclaw import KEYED_WITH_JUDGE_TYPE, old_claw, old_clawstore
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")

_CASE = """\
schema_version: 1
case_id: beta
title: Case beta
runner: {{type: llm_probe}}
input:
  messages:
  - {{role: system, content: Be brief.}}
  - {{role: user, content: Name a colour.}}
expectations:
  hard_expectations:
  - {{text: Answers.}}
rubric:
  scale:
    anchors:
      "10": {anchor}
  criteria:
  - name: clarity
    what_good_looks_like: {good}
    what_bad_looks_like: Rambles.
  scoring_instructions: {instructions}
"""
CLEAN = {"anchor": "Exactly one colour.", "good": "|-\n      One word,\n      a colour.",
         "instructions": "|-\n    Be strict.\n    Deduct for padding."}
# The same rubric as the judge's prompt shows it, written with whitespace it does not show.
DIRTY = {
    "blanks ending lines": {"anchor": "'Exactly one colour.  '", "good": "|-\n      One word,  \n      a colour.\t",
                            "instructions": "|-\n    Be strict.   \n    Deduct for padding. "},
    "CRLF line endings": {"anchor": "Exactly one colour.", "good": '"One word,\\r\\na colour.\\r\\n"',
                          "instructions": '"Be strict.\\r\\nDeduct for padding.\\r\\n"'},
    "a blank line after": {"anchor": "Exactly one colour.", "good": "|+\n      One word,\n      a colour.\n\n",
                           "instructions": "|+\n    Be strict.\n    Deduct for padding.\n\n"},
    "a blank line before": {"anchor": "Exactly one colour.", "good": "|-\n\n      One word,\n      a colour.",
                            "instructions": "|-\n\n    Be strict.\n    Deduct for padding."},
    # (re-wrapped text YAML folds to the same string: the same key on main too)
    "folded": {"anchor": ">-\n        Exactly\n        one colour.", "good": ">-\n      One word,\n\n      a colour.",
               "instructions": ">-\n    Be strict.\n\n    Deduct for\n    padding."},
}
# What the judge is shown of the rubric, however it is written above.
SHOWN = """\
## Rubric (case scale 0–10; report scores on 0–10)
### Scale anchors
| Score | Meaning |
|---|---|
| 10 | Exactly one colour. |
### Criteria
| Criterion | Looks good when | Looks bad when |
|---|---|---|
| clarity | One word,<br>a colour. | Rambles. |
### Scoring instructions
- Be strict.
- Deduct for padding.
"""


def _rubric(ws: Workspace, **parts: str) -> None:
    (ws.configs / "cases" / "beta" / "test.yaml").write_text(_CASE.format(**{**CLEAN, **parts}))


def _judged(ws: Workspace, standin: StandIn, **parts: str) -> None:
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(7))
    _rubric(ws, **parts)


def _build(ws: Workspace, here: bool = False) -> None:
    built = (run_here if here else run_claw)(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "Traceback" not in built.stdout + built.stderr, built


def _shown_rubrics(standin: StandIn) -> list[str]:
    """The rubric part of each judge prompt about case beta the stand-in received."""
    prompts = [r["messages"][-1]["content"] for r in standin.requests if r["model"] == JUDGE]
    return [p[p.index("## Rubric"):p.index("## Deterministic")].rstrip("\n") + "\n" for p in prompts
            if "Name a colour." in p]


@pytest.mark.parametrize("written", list(DIRTY))
def test_a_rubrics_whitespace_the_prompt_does_not_show_re_asks_no_judgement(ws: Workspace, standin: StandIn,
                                                                            written: str) -> None:
    """Built with the rubric written with whitespace, then written without: the judge was shown the rubric without it
    (before: a trailing newline, blanks or a CR reached the prompt, a `<br>` ending a cell), and no judgement is asked
    again (before: beta's 2, each edit)."""
    _judged(ws, standin, **DIRTY[written])
    _build(ws, here=True)
    assert judge_requests(standin) == 4
    assert _shown_rubrics(standin) == [SHOWN] * 2
    sent = len(standin.requests)
    _rubric(ws)
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]


def test_whitespace_the_prompt_shows_re_asks_the_judge(ws: Workspace, standin: StandIn) -> None:
    """Two blanks inside a line reach the judge: its key covers them (beta's 2 judgements asked again)."""
    _judged(ws, standin)
    _build(ws, here=True)
    assert _shown_rubrics(standin) == [SHOWN] * 2
    _rubric(ws, good="|-\n      One  word,\n      a colour.")
    _build(ws)
    assert judge_requests(standin) == 6
    assert _shown_rubrics(standin)[2:] == [SHOWN.replace("One word", "One  word")] * 2


def test_editing_the_judges_type_re_asks_no_judgement(ws: Workspace, standin: StandIn) -> None:
    """`type` is any text, claw's own: it is never sent and nothing reads it (before: the 4 judgements asked again)."""
    _judged(ws, standin)
    _build(ws, here=True)
    assert judge_requests(standin) == 4
    sent = len(standin.requests)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(type="openai_compatible"))
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]


def test_a_store_keyed_with_the_judges_type_and_the_rubric_as_written_keeps_its_judgements(
        ws: Workspace, standin: StandIn, tmp_path: Path) -> None:
    """Built by the claw before (the judge's `type` and the rubric as written in its judgements' keys): this claw
    reuses them under the key they had and records them under its own, which a gc keeps and which an edit of the type
    or of the rubric's whitespace leaves as it is (no request: before, 4 and then 2)."""
    _judged(ws, standin, **DIRTY["blanks ending lines"])
    built = old_claw(old_clawstore(tmp_path / "old", KEYED_WITH_JUDGE_TYPE), ws.root, "build", *CAMPAIGN)
    assert built.returncode == 0, built.stdout + built.stderr
    assert judge_requests(standin) == 4
    sent = len(standin.requests)
    planned = run_here(ws.root, "plan", *CAMPAIGN, "--output", "json")  # (the plan finds them as the build does)
    assert planned.code == 0 and json.loads(planned.stdout)["requests"] == 0, planned
    _build(ws)
    assert len(standin.requests) == sent, standin.requests[sent:]
    collected = run_here(ws.root, "gc", "--grace", "0s")
    assert collected.code == 0 and "Traceback" not in collected.stderr, collected
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(type="openai_compatible"))
    _rubric(ws)
    _build(ws, here=True)
    assert len(standin.requests) == sent, standin.requests[sent:]
