"""The judge's user prompt: target, checks, anchors, evidence, blindness, redaction, truncation."""

from __future__ import annotations

import pytest

from clawstore.evaluate import (
    JUDGE_PROMPT_FORMAT_VERSION,
    JudgeTarget,
    build_judge_evidence,
    evaluate_checks,
    render_judge_prompt,
)
from clawstore.evaluate.judge_evidence import EXCERPT_LIMIT, FINAL_OUTPUT_LIMIT

from .helpers import artifact, decl, final, msg, tool_call, tool_result

CASE = {
    "schema_version": 1,
    "case_id": "multi",
    "title": "Multi-turn",
    "runner": {"type": "openclaw"},
    "input": {
        "messages": [{"role": "system", "content": "Keep context across turns."}],
        "turns": [
            {"role": "user", "content": "Create draft.md with first-turn-marker."},
            {"role": "user", "content": "Now write report.md based on draft.md."},
        ],
        "attachments": ["files/brief.txt"],
    },
    "expectations": {
        "hard_expectations": [{"text": "Creates report.md", "weight": 2.0}],
        "soft_expectations": [{"text": "Brief confirmation", "weight": 0.5}],
    },
    "rubric": {
        "version": 1,
        "scale": {"min": 0, "max": 10, "anchors": {"4": "Partial", "10": "Perfect | flawless", "7": "Mostly"}},
        "criteria": [{"name": "Continuity", "what_good_looks_like": "uses draft", "what_bad_looks_like": "ignores"}],
        "scoring_instructions": "Cap at 4 if a hard expectation fails.\nBe strict.",
    },
}
ANCHORS = [{"anchor_id": "gold", "label": "Gold standard", "text": "Both files, exact markers, short reply."}]


def openclaw_run(final_text: str = '{"payloads": [{"text": "Created report.md for you."}]}') -> dict:
    return artifact("openclaw", trace=[msg("user", "turn"), final(final_text)],
                    input_context={"openclaw": {"expected_artifact": "report.md"}})


def render(art: dict, checks: list | None = None, anchors=None, workspace=None, **kw) -> str:
    evidence = build_judge_evidence(art, workspace_files=workspace, **kw)
    results = evaluate_checks(checks or [], art, workspace_files=workspace)
    return render_judge_prompt(JudgeTarget.from_case(CASE), evidence, results, anchors, **kw)


def test_prompt_shows_turns_expectations_rubric_and_which_checks_failed() -> None:
    workspace = {"report.md": b"# Report\nsecond-turn-marker\n", "draft.md": b"# Draft\n"}
    checks = [
        decl("final-present", "final_response_present", ["task"]),
        decl("report-marker", "openclaw_workspace_file_present", ["process"], relative_path="report.md",
             contains="missing-marker"),
    ]
    text = render(openclaw_run(), checks, workspace=workspace)
    assert "Keep context across turns." in text
    assert "Turn 1. USER" in text and "Create draft.md with first-turn-marker." in text
    assert "Turn 2. USER" in text and "Now write report.md based on draft.md." in text
    assert "- brief.txt" in text
    assert "[weight 2, 100% of this group] Creates report.md" in text
    assert "[weight 0.5, 100% of this group] Brief confirmation" in text
    # anchors sorted by score, descending; pipes escaped
    rows = [line for line in text.splitlines() if line.startswith("| 10 ") or line.startswith("| 7 ")
            or line.startswith("| 4 ")]
    assert rows == ["| 10 | Perfect \\| flawless |", "| 7 | Mostly |", "| 4 | Partial |"]
    assert "| Continuity | uses draft | ignores |" in text
    assert "- Cap at 4 if a hard expectation fails.\n- Be strict." in text
    assert "Summary: 1 passed, 1 failed, 0 could not be evaluated, 2 total." in text
    assert "- PASSED `final-present` (final_response_present; task)" in text
    failed_line = next(line for line in text.splitlines() if "`report-marker`" in line)
    assert failed_line.startswith("- FAILED") and "does not contain 'missing-marker'" in failed_line
    # evidence: visible text of the payload, and the workspace file excerpt
    assert "Created report.md for you." in text
    assert "second-turn-marker" in text and "## Final workspace files" in text
    assert text.endswith("\n") and "# RESPONSE FORMAT" in text


def test_anchors_only_when_given_or_enabled() -> None:
    art = openclaw_run()
    assert "Gold standard (gold): Both files" in render(art, anchors=ANCHORS)
    assert "Calibration anchors" in render(art, anchors={"enabled": True, "references": ANCHORS})
    assert "Calibration anchors" not in render(art, anchors={"enabled": False, "references": ANCHORS})
    assert "Calibration anchors" not in render(art, anchors=None)


def test_prompt_is_blind_to_the_subject_model() -> None:
    art = artifact(trace=[msg("user", "q"), msg("assistant", "As acme/supermodel-9 (supermodel-9) I say 4."),
                          final("I am supermodel-9-20260101, the answer is 4.")])
    text = render(art)
    lowered = text.lower()
    for needle in ("supermodel", "acmecloud", "openrouter.ai", "0.0123", "cost", "input_tokens"):
        assert needle not in lowered, needle
    assert "the answer is 4" in text and "[subject model]" in text


def test_secrets_are_redacted() -> None:
    secrets = ["sk-or-v1-" + "a1" * 20, "sk-proj-" + "Z" * 30, "AKIA" + "ABCDEFGHIJKLMNOP",
               "ghp_" + "x" * 36, "xoxb-1234567890-abcdefghij", "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig"]
    leak = " ".join(secrets) + " api_key=supersecretvalue123 token: 123456"
    art = artifact(trace=[tool_call("c1", "exec_shell", {"command": "env"}), tool_result("c1", {"output": leak}),
                          final("Done. " + leak)])
    text = render(art)
    for s in [*secrets, "supersecretvalue123"]:
        assert s not in text
    assert "Bearer [REDACTED]" in text and "api_key=[REDACTED]" in text
    assert "token: 123456" in text  # counters are not secrets
    unredacted = render(art, redact_secrets=False)
    assert secrets[0] in unredacted


def test_tool_activity_and_failures() -> None:
    search = {"query": "weather", "results": [{"title": "Forecast", "url": "https://example.org/x"}]}
    art = artifact(status="failed", trace=[
        tool_call("c1", "web_search", {"query": "weather"}), tool_result("c1", {"status": "success", "output": search}),
        tool_call("c2", "write_file", {"path": "/tmp/out.txt", "content": "hi"}),
        tool_result("c2", {"status": "success", "output": {"bytes_written": 2}}),
    ], error={"code": "runner_execution_failed", "message": "max_turns exceeded", "metadata": {"stderr": "trace"}})
    evidence = build_judge_evidence(art, sandbox_files={"/tmp/out.txt": b"hi from sandbox"})
    text = render_judge_prompt(JudgeTarget.from_case(CASE), evidence, [], None)
    assert "2 tool call(s); tools used: web_search, write_file." in text
    assert "search results for 'weather': 1 result(s); sources: example.org" in text
    assert '"path": "/tmp/out.txt"' in text
    assert "- runner_execution_failed: max_turns exceeded" in text
    assert "hi from sandbox" in text and "/tmp/out.txt (written_file" in text
    assert "Run status: failed" in text
    assert "## Final answer\n- none" in text


def test_long_evidence_is_truncated_deterministically() -> None:
    long_answer = "A" * (FINAL_OUTPUT_LIMIT + 500)
    art = openclaw_run(long_answer)
    workspace = {"report.md": "B" * (EXCERPT_LIMIT * 3)}
    one = render(art, workspace=workspace)
    two = render(art, workspace=workspace)
    assert one == two
    assert "A" * FINAL_OUTPUT_LIMIT in one and "A" * (FINAL_OUTPUT_LIMIT + 1) not in one
    assert "[truncated 500 chars]" in one
    assert "B" * EXCERPT_LIMIT in one and "B" * (EXCERPT_LIMIT + 1) not in one


def test_from_case_accepts_models_and_resolved_messages() -> None:
    from clawstore.config.models import TestCase

    model = TestCase.model_validate(CASE)
    target = JudgeTarget.from_case(model, messages=[{"role": "user", "content": "resolved from source"}])
    assert target.task_messages == [{"role": "user", "name": None, "content": "resolved from source"}]
    assert [t["content"] for t in target.turns] == [t["content"] for t in CASE["input"]["turns"]]
    assert target.rubric and target.rubric["scale"]["anchors"]["10"] == "Perfect | flawless"
    assert isinstance(JUDGE_PROMPT_FORMAT_VERSION, int)


@pytest.mark.parametrize("status", ["success", "failed"])
def test_raw_payload_is_not_shown_as_an_answer(status: str) -> None:
    art = artifact("openclaw", status=status, trace=[final('{"payloads": [], "meta": {"agentMeta": {}}}')])
    text = render(art)
    assert "raw payload and no assistant-visible text" in text
    assert "agentMeta" not in text


def test_the_shortest_secrets_are_still_redacted() -> None:
    from clawstore.evaluate.redact import redact_text, redact_value

    # Texts shorter than any secret are returned as they are; the shortest that can hold one are not.
    assert redact_text("x1y2z3w4", ["x1y2z3w4"]) == "[REDACTED]"  # an environment value of 8 characters
    assert redact_text("token=abcdef") == "token=[REDACTED]"  # the shortest assignment
    assert redact_value({"role": "user", "k": "x1y2z3w4"}, ["x1y2z3w4"]) == {"role": "user", "k": "[REDACTED]"}


def test_a_group_with_a_negative_weight_shows_the_weights_without_shares() -> None:
    # The schema takes any number as a weight (the reference system never used it): -1 beside 2 read
    # "[weight -1, -100% of this group]" in the paid judge's prompt; the other group keeps its shares.
    case = {**CASE, "expectations": {
        "hard_expectations": [{"text": "Creates report.md", "weight": 2}, {"text": "No draft left", "weight": -1}],
        "soft_expectations": [{"text": "Brief", "weight": 1}, {"text": "Polite", "weight": 3}]}}
    art = openclaw_run()
    text = render_judge_prompt(JudgeTarget.from_case(case), build_judge_evidence(art), evaluate_checks([], art))
    assert "- [weight 2] Creates report.md\n- [weight -1] No draft left" in text
    assert "- [weight 1, 25% of this group] Brief\n- [weight 3, 75% of this group] Polite" in text
    assert "%" not in text.split("### Hard")[1].split("### Soft")[0]


# The rubric of CASE written with whitespace the prompt does not show, and with a blank inside a line, which it does.
UNSHOWN_BLANKS = {
    "scale": {"min": 0, "max": 10, "anchors": {"4": "Partial  ", "10": "\r\nPerfect | flawless\n\n", "7": " Mostly"}},
    "criteria": [{"name": "Continuity", "what_good_looks_like": "uses draft", "what_bad_looks_like": "ignores"}],
    "scoring_instructions": "\n  Cap at 4 if a hard expectation fails.  \r\n\r\nBe strict.\n\n",
}


def _target(rubric: dict) -> JudgeTarget:
    return JudgeTarget.from_case({**CASE, "rubric": {"version": 1, **rubric}})


def _rubric_part(target: JudgeTarget) -> str:
    text = render_judge_prompt(target, build_judge_evidence(openclaw_run()), [])
    return text[text.index("## Rubric"):text.index("## Deterministic")]


def test_shown_holds_the_rubric_as_the_prompt_shows_it() -> None:
    """`shown()` (what a judgement's key covers, and the prompt is rendered from) takes out only whitespace the prompt
    does not show: the rubric of CASE, written without any, is kept as it is (the same object: its key unchanged);
    written with some, it becomes that rubric and renders the same prompt; a blank inside a line stays."""
    clean = JudgeTarget.from_case(CASE)
    assert clean.shown() is clean
    dirty = _target(UNSHOWN_BLANKS)
    assert dirty.shown() == clean and dirty.shown().shown() == dirty.shown()
    assert _rubric_part(dirty.shown()) == _rubric_part(clean)
    inner = _target({**UNSHOWN_BLANKS, "scoring_instructions": "Cap at 4  if a hard expectation fails.\nBe strict."})
    assert inner.shown() != clean and "- Cap at 4  if" in _rubric_part(inner.shown())
    # a blank ending a cell's line, or a lone CR, no longer reaches the prompt (it did: `Two,  <br>lines`)
    two = _target({"criteria": [{"name": "c", "what_good_looks_like": "Two,  \nlines\rhere",
                                 "what_bad_looks_like": "x"}]})
    assert "| c | Two,<br>lines<br>here | x |" in _rubric_part(two.shown())
