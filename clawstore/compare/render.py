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


def render_comparison(c: Comparison, output: str, all_cases: bool = False) -> str:
    """`all_cases`: list the cases within the noise too (text and markdown; JSON always has every case)."""
    if output == "json":
        return json.dumps(c.to_json(), sort_keys=True)
    rows = _rows(c, all_cases)
    lines = _summary(c, all_cases)
    if output == "markdown":
        return render_markdown(HEADERS, rows) + "\n" + "\n".join(f"- {line}" for line in lines)
    return render_table(HEADERS, rows) + "\n" + "\n".join(lines)
