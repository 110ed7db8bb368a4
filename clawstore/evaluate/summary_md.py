"""A human-readable markdown summary of one run's evaluation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clawstore.evaluate.aggregate import FinalResult
from clawstore.evaluate.evidence import DIMENSIONS
from clawstore.evaluate.judge import JudgeIteration
from clawstore.evaluate.specs import plain


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def _cell(text: Any) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ").strip()


def _verdict(final: Mapping[str, Any]) -> str:
    if final.get("status") != "success":
        return "not available (no successful judge iteration)"
    passed = final.get("passed")
    if passed is None:
        return "no verdict (no pass_threshold set)"
    return f"{'PASS' if passed else 'FAIL'} (threshold {_fmt(final.get('threshold_score'))})"


def render_result_summary_md(
    final: FinalResult | Mapping[str, Any],
    checks: Any,
    judge_iterations: Sequence[JudgeIteration | Mapping[str, Any]],
) -> str:
    """Markdown: score and verdict, per-dimension table, per-check PASS/FAIL table, judge summaries."""
    fin = final.to_dict() if isinstance(final, FinalResult) else dict(final)
    # (read, never changed: the checks' JSON as stored is read in place, a model made plain first)
    check_data = checks if type(checks) is dict else plain(checks) if checks is not None else {}
    results = check_data.get("checks", []) if isinstance(check_data, dict) else list(check_data)
    det_scores = check_data.get("dimension_scores", {}) if isinstance(check_data, dict) else {}
    its = [i.to_dict() if isinstance(i, JudgeIteration) else dict(i) for i in judge_iterations]

    lines = ["# Evaluation Result", ""]
    lines.append(f"- Final score: {_fmt(fin.get('final_score'))} / 10")
    lines.append(f"- Verdict: {_verdict(fin)}")
    lines.append(f"- Aggregation: {fin.get('method')}")
    counts = fin.get("counts") or {}
    lines.append(f"- Judge iterations: {counts.get('used', 0)} used, {counts.get('successful', 0)} successful, "
                 f"{counts.get('iterations', 0)} total")
    passed = sum(1 for r in results if r.get("outcome") == "passed")
    lines.append(f"- Deterministic checks: {passed}/{len(results)} passed")
    lines.append("")

    lines += ["## Dimensions", "", "| Dimension | Judge (final) | Deterministic |", "|---|---|---|"]
    dims = fin.get("final_dimensions") or {}
    for d in DIMENSIONS:
        lines.append(f"| {d} | {_fmt(dims.get(d))} | {_fmt(det_scores.get(d))} |")
    lines.append("")

    lines += ["## Deterministic checks", ""]
    if not results:
        lines.append("No deterministic checks.")
    else:
        lines += ["| Check | Kind | Result | Message |", "|---|---|---|---|"]
        for r in results:
            mark = {"passed": "PASS", "failed": "FAIL"}.get(str(r.get("outcome")), "ERROR")
            lines.append(
                f"| {_cell(r.get('check_id'))} | {_cell(r.get('kind'))} | {mark} | {_cell(r.get('message'))} |"
            )
    lines.append("")

    lines += ["## Judge", ""]
    if fin.get("summary"):
        lines += [str(fin["summary"]), ""]
    for e in fin.get("overall_evidence") or []:
        lines.append(f"- {e}")
    if fin.get("overall_evidence"):
        lines.append("")
    if its:
        lines += ["| Judge run | Repetition | Status | Overall | Summary |", "|---|---|---|---|---|"]
        for it in sorted(its, key=lambda i: (str(i.get("judge_run_id")), int(i.get("repetition") or 0))):
            scores = it.get("scores") or {}
            lines.append(f"| {_cell(it.get('judge_run_id'))} | {it.get('repetition')} | {it.get('status')} "
                         f"| {_fmt(scores.get('overall_score'))} | {_cell(scores.get('summary'))} |")
        lines.append("")
    warnings = list(fin.get("warnings") or [])
    if isinstance(check_data, dict):
        warnings += list(check_data.get("warnings") or [])
    lines += ["## Warnings", ""]
    lines += [f"- {w}" for w in warnings] or ["None."]
    return "\n".join(lines).rstrip() + "\n"
