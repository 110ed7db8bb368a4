"""The judge's user prompt: what was asked, how to score it, and what the subject did.

Deterministic text (it is hashed into the judge key). Bump JUDGE_PROMPT_FORMAT_VERSION whenever
the rendering changes, so stored judgements are recomputed rather than silently reused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from clawstore.evaluate.evidence import DIMENSIONS
from clawstore.evaluate.redact import redact_text
from clawstore.evaluate.specs import plain

JUDGE_PROMPT_FORMAT_VERSION = 1

_DIMENSION_MEANINGS = {
    "task": "the requested end result was delivered",
    "process": "required steps, tools and artifacts were used and produced",
    "autonomy": "it finished without needless questions or hand-holding",
    "closeness": "it stayed on task and claimed nothing the evidence does not show",
    "efficiency": "no wasted steps or padding",
    "spark": "genuine extra value, never fluff",
}


@dataclass(frozen=True)
class JudgeTarget:
    """What the subject was asked and how it should be judged (from the test case)."""

    task_messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    hard_expectations: list[dict[str, Any]] = field(default_factory=list)
    soft_expectations: list[dict[str, Any]] = field(default_factory=list)
    rubric: dict[str, Any] | None = None
    attachments: list[str] = field(default_factory=list)

    @classmethod
    def from_case(
        cls,
        case: Any,
        messages: Sequence[Any] | None = None,
        turns: Sequence[Any] | None = None,
        attachments: Sequence[str] | None = None,
    ) -> JudgeTarget:
        """From a TestCase (model or dict). Pass `messages`/`turns` already resolved (sources
        expanded, e.g. ResolvedMessage objects or dicts); otherwise the inline contents are used."""
        data = plain(case)
        inp = data.get("input") or {}
        expectations = data.get("expectations") or {}
        names = attachments
        if names is None:
            names = [str(a).replace("\\", "/").rsplit("/", 1)[-1] for a in inp.get("attachments") or []]
        return cls(
            task_messages=_messages(messages if messages is not None else inp.get("messages") or []),
            turns=_messages(turns if turns is not None else inp.get("turns") or []),
            hard_expectations=_expectations(expectations.get("hard_expectations")),
            soft_expectations=_expectations(expectations.get("soft_expectations")),
            rubric=data.get("rubric"),
            attachments=list(names),
        )

    def shown(self) -> JudgeTarget:
        """The target as the judge's prompt shows it, what the prompt is rendered from and a judgement's key covers:
        without a rubric the prompt shows nothing of (`shown_before_76`), its texts without the whitespace the prompt
        does not show (`_shown_rubric`: since session 76; before, a rubric's line endings, blanks ending a line or
        blank lines around a text were in the key, and an edit of them asked the judge again for the same prompt)."""
        target = self.shown_before_76()
        if target.rubric is None:
            return target
        rubric = _shown_rubric(target.rubric)
        return target if rubric == target.rubric else replace(target, rubric=rubric)

    def shown_before_76(self) -> JudgeTarget:
        """Without a rubric the prompt shows nothing of (a `scale` with neither anchors, criteria nor scoring
        instructions, an empty one, blank instructions): what a judgement's key covered in session 75 (before, such a
        rubric's edit asked the judge again for the same prompt)."""
        if self.rubric is None or _render_rubric(self.rubric):
            return self
        return replace(self, rubric=None)


def _messages(items: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        as_dict = getattr(item, "as_dict", None)
        msg = as_dict() if callable(as_dict) else plain(item)
        content = msg.get("content")
        if content is None and msg.get("source"):
            content = f"(content from file {msg['source'].get('path')})"
        out.append({"role": str(msg.get("role") or "user"), "name": msg.get("name"), "content": str(content or "")})
    return out


def _expectations(items: Any) -> list[dict[str, Any]]:
    return [{"text": str(e.get("text")), "weight": float(e.get("weight", 1.0))} for e in plain(items or [])]


# ---------------------------------------------------------------------------------------------
# rendering helpers


def _indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line if line else "" for line in text.splitlines() or [""])


_LINE_BREAK = re.compile(r"\r\n?|\n")


def _cell_text(text: Any) -> str:
    """A table cell's text as the prompt shows it: lines ended by LF (a CR, or CR LF, ends one too), none ending in
    blanks, no blank line (nor blanks) before or after the text. Blanks inside a line, or starting one after the first,
    are kept: the judge reads them."""
    return "\n".join(line.rstrip() for line in _LINE_BREAK.split(str(text))).strip()


def _cell(text: Any) -> str:
    return _cell_text(text).replace("|", "\\|").replace("\n", "<br>")


def _instruction_lines(text: str | None) -> list[str]:
    """Scoring instructions as the prompt shows them: one item per line with text, stripped."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def _shown_rubric(rubric: Mapping[str, Any]) -> dict[str, Any]:
    """`rubric` (a TestCase's, dumped) with each text the prompt shows as it shows it (`_cell_text`; the scoring
    instructions' lines stripped, without blank lines, none when no line has text). The prompt renders the same from
    either: a rubric written without such whitespace is this one as it is (its key unchanged since session 75). An
    anchor's label is normalised only when no two labels become one (both rows are shown)."""
    shown = dict(rubric)
    scale = rubric.get("scale")
    if isinstance(scale, Mapping) and scale.get("anchors"):
        anchors = {str(k): str(v) for k, v in scale["anchors"].items()}
        apart = len({_cell_text(k) for k in anchors}) == len(anchors)
        shown["scale"] = {**scale, "anchors": {
            (_cell_text(k) if apart else k): _cell_text(v) for k, v in anchors.items()}}
    if rubric.get("criteria"):
        shown["criteria"] = [{**c, **{k: _cell_text(v) for k, v in c.items() if isinstance(v, str)}}
                             for c in rubric["criteria"]]
    if "scoring_instructions" in rubric:
        shown["scoring_instructions"] = "\n".join(_instruction_lines(rubric["scoring_instructions"])) or None
    return shown


def _num(value: float) -> str:
    return f"{value:g}"


def _anchor_sort_key(item: tuple[str, str]) -> tuple[int, float, str]:
    try:
        return (0, -float(item[0]), item[0])
    except ValueError:
        return (1, 0.0, item[0])  # non-numeric labels after the numeric ones


def _fence(text: str, kind: str) -> str:
    lang = {"markdown": "markdown", "json": "json", "html": "html"}.get(kind, "")
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _render_messages(title: str, messages: list[dict[str, Any]], label: str) -> list[str]:
    lines = [f"## {title}"]
    if not messages:
        return [*lines, "- none", ""]
    for i, msg in enumerate(messages, 1):
        who = msg["role"].upper() + (f" ({msg['name']})" if msg.get("name") else "")
        lines.append(f"{label} {i}. {who}" if label else f"{i}. {who}")
        lines.append(_indent(msg["content"]))
    lines.append("")
    return lines


def _render_expectations(target: JudgeTarget) -> list[str]:
    lines = ["## Expectations"]
    if not target.hard_expectations and not target.soft_expectations:
        return [*lines, "- none stated", ""]
    for title, items in (
        ("Hard (required; a miss caps the related scores)", target.hard_expectations),
        ("Soft (preferences; a miss lowers scores modestly)", target.soft_expectations),
    ):
        if not items:
            continue
        lines.append(f"### {title}")
        lines += [f"- [{label}] {e['text']}" for label, e in zip(_weight_labels(items), items, strict=True)]
    lines.append("")
    return lines


def _weight_labels(items: list[Mapping[str, Any]]) -> list[str]:
    """Each expectation's weight, and its share of the group when that means something: the schema takes any number
    (as the reference system, which never used it), and -1 beside 2 would read "-100% of this group"."""
    weights = [e["weight"] for e in items]
    if any(w < 0 for w in weights):
        return [f"weight {_num(w)}" for w in weights]
    total = sum(weights) or 1.0
    return [f"weight {_num(w)}, {w / total:.0%} of this group" for w in weights]


def _render_rubric(rubric: Mapping[str, Any] | None) -> list[str]:
    if not rubric:
        return []
    scale = rubric.get("scale") or {}
    anchors = {str(k): str(v) for k, v in (scale.get("anchors") or {}).items()}
    criteria = rubric.get("criteria") or []
    instructions = _instruction_lines(rubric.get("scoring_instructions"))
    if not anchors and not criteria and not instructions:
        return []
    lo, hi = float(scale.get("min", 0)), float(scale.get("max", 10))
    lines = [f"## Rubric (case scale {_num(lo)}–{_num(hi)}; report scores on 0–10)"]
    if anchors:
        lines += ["### Scale anchors", "| Score | Meaning |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in sorted(anchors.items(), key=_anchor_sort_key)]
    if criteria:
        lines += ["### Criteria", "| Criterion | Looks good when | Looks bad when |", "|---|---|---|"]
        for c in criteria:
            lines.append(f"| {_cell(c.get('name'))} | {_cell(c.get('what_good_looks_like'))} "
                         f"| {_cell(c.get('what_bad_looks_like'))} |")
    if instructions:
        lines.append("### Scoring instructions")
        lines += [f"- {line}" for line in instructions]
    lines.append("")
    return lines


def _anchor_list(anchors: Any) -> list[dict[str, Any]]:
    if anchors is None:
        return []
    data = plain(anchors)
    if isinstance(data, dict):  # an AnchorsConfig: only when enabled
        return list(data.get("references") or []) if data.get("enabled") else []
    return list(data)


def _render_anchors(anchors: Any) -> list[str]:
    refs = _anchor_list(anchors)
    if not refs:
        return []
    lines = ["## Calibration anchors (reference descriptions to calibrate your scores)"]
    for ref in sorted(refs, key=lambda r: str(r.get("anchor_id"))):
        lines.append(f"- {ref.get('label')} ({ref.get('anchor_id')}): {ref.get('text')}")
    lines.append("")
    return lines


def _check_results(checks: Any) -> list[dict[str, Any]]:
    data = plain(checks) if checks is not None else []
    if isinstance(data, dict):
        data = data.get("checks") or []
    return list(data)


def _render_checks(checks: Any) -> list[str]:
    results = _check_results(checks)
    lines = ["## Deterministic checks (objective; already evaluated by the harness)"]
    if not results:
        return [*lines, "- none defined", ""]
    counts = {o: sum(1 for r in results if r.get("outcome") == o) for o in ("passed", "failed", "error")}
    lines.append(f"Summary: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} could not be "
                 f"evaluated, {len(results)} total.")
    for r in results:
        outcome = {"passed": "PASSED", "failed": "FAILED"}.get(str(r.get("outcome")), "ERROR")
        dims = ", ".join(r.get("dimensions") or []) or "no dimension"
        desc = f" — {r['description']}" if r.get("description") else ""
        lines.append(f"- {outcome} `{r.get('check_id')}` ({r.get('kind')}; {dims}){desc}: {r.get('message') or ''}")
    lines.append("")
    return lines


def _render_subject(evidence: Mapping[str, Any]) -> list[str]:
    lines = ["# SUBJECT RESPONSE", ""]
    final = evidence.get("final_output")
    if final:
        lines += [f"## Final answer ({final['content_type']}, {final['char_count']} chars)",
                  _fence(final["text"], final["content_type"]), ""]
    elif evidence.get("final_output_was_raw_payload"):
        lines += ["## Final answer", "- none: the run ended with a raw payload and no assistant-visible text", ""]
    else:
        lines += ["## Final answer", "- none", ""]
    messages = evidence.get("assistant_messages") or []
    lines.append("## Assistant-visible messages")
    if not messages:
        lines.append("- none")
    for i, block in enumerate(messages, 1):
        lines.append(f"{i}.")
        lines.append(_indent(block["text"]))
    if evidence.get("assistant_messages_omitted"):
        lines.append(f"({evidence['assistant_messages_omitted']} messages in the middle omitted)")
    lines.append("")
    return lines


def _render_tools(activity: Mapping[str, Any]) -> list[str]:
    count = activity.get("tool_call_count", 0)
    used = ", ".join(activity.get("tools_used") or []) or "none"
    lines = ["## Tool activity", f"{count} tool call(s); tools used: {used}."]
    if activity.get("source") == "openclaw_tool_summary":
        failures = activity.get("failures")
        lines.append("(from the agent's own tool summary; per-call details are not available"
                     + (f"; {failures} call(s) failed)" if failures is not None else ")"))
    for i, event in enumerate(activity.get("events") or [], 1):
        if event["kind"] == "call":
            lines.append(f"{i}. call {event['tool']} [{event.get('call_id')}] arguments: {event['arguments']}")
        else:
            lines.append(f"{i}. result {event['tool']} [{event.get('call_id')}] status={event.get('status')}:")
            lines.append(_indent(str(event["summary"]), "      "))
    if activity.get("events_omitted"):
        lines.append(f"({activity['events_omitted']} tool events in the middle omitted)")
    lines.append("")
    return lines


def _render_execution(evidence: Mapping[str, Any]) -> list[str]:
    lines = ["# EXECUTION EVIDENCE", "", f"Run status: {evidence.get('run_status')}", ""]
    lines += _render_tools(evidence.get("tool_activity") or {})
    lines.append("## Material failures")
    failures = evidence.get("material_failures") or []
    if not failures:
        lines.append("- none")
    for f in failures:
        lines.append(f"- {f.get('code')}: {f.get('message')}")
        if f.get("detail"):
            lines.append(_indent(str(f["detail"]), "    "))
    lines.append("")
    lines.append("## Files produced (excerpts)")
    artifacts = evidence.get("artifacts") or []
    if not artifacts:
        lines.append("- none captured")
    for a in artifacts:
        if not a.get("present"):
            lines.append(f"- {a['name']} ({a['kind']}): MISSING")
        elif a.get("excerpt") is None:
            lines.append(f"- {a['name']} ({a['kind']}): binary, {a.get('byte_size')} bytes")
        else:
            lines.append(f"- {a['name']} ({a['kind']}, {a.get('byte_size')} bytes):")
            lines.append(_fence(a["excerpt"], "text"))
    if "workspace_files" in evidence:
        listing = ", ".join(evidence["workspace_files"]) or "empty"
        more = evidence.get("workspace_files_omitted") or 0
        lines += ["", "## Final workspace files", listing + (f" (+{more} more)" if more else "")]
    lines.append("")
    return lines


def _render_contract() -> list[str]:
    return [
        "# RESPONSE FORMAT",
        'Reply with one JSON object only: {"summary": str, "dimensions": {<dimension>: {"evidence": [str], '
        '"score": 0-10}, ...}, "overall": {"evidence": [str], "score": 0-10}}, with one entry in "dimensions" '
        "for each of: " + ", ".join(DIMENSIONS) + ".",
    ]


def render_judge_prompt(
    target: JudgeTarget,
    evidence: Mapping[str, Any],
    checks: Any,
    anchors: Any = None,
    *,
    redact_secrets: bool = True,
) -> str:
    """The user prompt text. `checks`: per-check results (or the `evaluate_checks` dict);
    `anchors`: the evaluation profile's anchor references when enabled (or an AnchorsConfig)."""
    lines = ["# EVALUATION TARGET", ""]
    lines.append("Score each dimension from 0 to 10, then give an overall score from 0 to 10:")
    lines += [f"- {d}: {_DIMENSION_MEANINGS[d]}" for d in DIMENSIONS]
    lines.append("")
    lines += _render_messages("Task messages", target.task_messages, "")
    if target.turns:
        lines += _render_messages(
            "User turns (sent one after another in the same session, after the task messages)", target.turns, "Turn"
        )
    if target.attachments:
        lines += ["## Attachments given to the subject", *[f"- {a}" for a in target.attachments], ""]
    lines += _render_expectations(target)
    lines += _render_rubric(target.rubric)
    lines += _render_anchors(anchors)
    lines += _render_checks(checks)
    lines += _render_subject(evidence)
    lines += _render_execution(evidence)
    lines += _render_contract()
    text = "\n".join(lines).rstrip() + "\n"
    return redact_text(text) if redact_secrets else text
