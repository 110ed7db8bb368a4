"""A comparison as text (an aligned table), markdown or JSON."""

from __future__ import annotations

import json

from clawstore.compare.delta import Comparison, Delta
from clawstore.query.formats import render_markdown, render_table

HEADERS = ["MODEL", "CASE", "A", "B", "DELTA", "INTERVAL", "VERDICT"]


def _signed(value: float) -> str:
    """Two decimals, or as many significant digits as show that a small delta is not 0 (a change of one
    case in hundreds moves a model's mean by thousandths: `+0.00 improved` would read as a bug)."""
    value += 0.0  # (-0.0 is 0)
    shown = f"{value:+.2f}"
    return f"{value:+.2g}" if value and float(shown) == 0 else shown


def _row(d: Delta) -> list[str]:
    return [d.model_id, d.case_id or "(all cases)", f"{d.a:.2f}", f"{d.b:.2f}", _signed(d.delta),
            f"[{_signed(d.low)}, {_signed(d.high)}]", d.verdict]


def _rows(c: Comparison, all_cases: bool) -> list[list[str]]:
    rows = []
    for model in c.models:
        rows.append(_row(model))
        rows += [_row(d) for d in c.cases
                 if d.model_id == model.model_id and (all_cases or d.verdict != "within noise")]
    return rows


def _summary(c: Comparison, all_cases: bool) -> list[str]:
    lines = [f"A = {c.a.label} ({c.a.campaign_id}), B = {c.b.label} ({c.b.campaign_id}); "
             f"{c.confidence:.0%} intervals (Bonferroni-adjusted), {c.samples} bootstrap samples"]
    flagged = [d for d in c.cases if d.verdict != "within noise"]
    hidden = "" if all_cases or len(flagged) == len(c.cases) else " (the others are not listed: --all-cases)"
    lines.append(f"{len(flagged)} of {len(c.cases)} case deltas beyond the noise{hidden}; "
                 f"regressed models: {', '.join(d.model_id for d in c.regressions) or 'none'}")
    if c.unmeasured:
        lines.append(f"no noise measured for {', '.join(c.unmeasured)}: one run and one judgement per case, "
                     "so any change counts as beyond it (judge or run repetitions measure it)")
    lines += c.unmatched
    return lines


PAIRED_HEADERS = ["MODEL", "CASES", "DELTA", "INTERVAL", "P", "MDE_80%", "VERDICT"]


def _optional(value: float | None, fmt: str = "+.2f") -> str:
    return "n/a" if value is None else f"{value:{fmt}}"


def _paired_rows(c: Comparison) -> list[list[str]]:
    return [[p.model_id, str(p.result.n), _signed(p.result.delta),
             "n/a" if p.result.low is None or p.result.high is None
             else f"[{_signed(p.result.low)}, {_signed(p.result.high)}]",
             _optional(p.result.p_value, ".3f"), _optional(p.result.mde, ".2f"), p.verdict(c.margin)]
            for p in c.paired]


def _paired_lines(c: Comparison) -> list[str]:
    """The gate's comparison in words, the flipped verdicts and each side's judge noise."""
    failed = ", ".join(p.model_id for p in c.gate_failures) or "none"
    lines = [f"Paired over the cases on both sides (B - A; bootstrap of cases, {c.confidence:.0%} Bonferroni-adjusted "
             f"over models; P: sign-flip permutation; MDE_80%: the true drop found 4 times in 5 at this many cases "
             f"and this spread); --fail-on-regression fails on: {failed} (margin {c.margin:g})"]
    if c.flips:
        lines.append(f"verdicts flipped ({len(c.flips)}): " + ", ".join(
            f"{f.model_id}/{f.case_id} {'pass' if f.a else 'fail'}->{'pass' if f.b else 'fail'}" for f in c.flips))
    for j in c.judge_noise:
        r = j.reliability
        lines.append(f"judge noise, side {j.side}, {j.model_id}, judge {j.judge_run_id}: mean |difference| between "
                     f"repetitions {r.mad:.2f} over {r.runs} runs, ICC {_optional(r.icc, '.2f')}"
                     + ("" if r.flip_share is None else f", verdict flips between repetitions {r.flip_share:.0%}"))
    return lines


def render_comparison(c: Comparison, output: str, all_cases: bool = False) -> str:
    """`all_cases`: list the cases within the noise too (text and markdown; JSON always has every case)."""
    if output == "json":
        return json.dumps(c.to_json(), sort_keys=True)
    rows = _rows(c, all_cases)
    lines = _summary(c, all_cases)
    paired, paired_lines = _paired_rows(c), _paired_lines(c)
    if output == "markdown":
        return (render_markdown(HEADERS, rows) + "\n" + "\n".join(f"- {line}" for line in lines) + "\n\n"
                + render_markdown(PAIRED_HEADERS, paired) + "\n" + "\n".join(f"- {line}" for line in paired_lines))
    return (render_table(HEADERS, rows) + "\n" + "\n".join(lines) + "\n\n" + render_table(PAIRED_HEADERS, paired)
            + "\n" + "\n".join(paired_lines))
