"""A comparison as text (an aligned table), markdown or JSON."""

from __future__ import annotations

import json

from clawstore.compare.delta import Comparison, Delta
from clawstore.query.formats import render_markdown, render_table

HEADERS = ["MODEL", "CASE", "A", "B", "DELTA", "INTERVAL", "VERDICT"]


def _row(d: Delta) -> list[str]:
    return [d.model_id, d.case_id or "(all cases)", f"{d.a:.2f}", f"{d.b:.2f}", f"{d.delta:+.2f}",
            f"[{d.low:+.2f}, {d.high:+.2f}]", d.verdict]


def _rows(c: Comparison) -> list[list[str]]:
    rows = []
    for model in c.models:
        rows.append(_row(model))
        rows += [_row(d) for d in c.cases if d.model_id == model.model_id]
    return rows


def _summary(c: Comparison) -> list[str]:
    lines = [f"A = {c.a.label} ({c.a.campaign_id}), B = {c.b.label} ({c.b.campaign_id}); "
             f"{c.confidence:.0%} intervals (Bonferroni-adjusted), {c.samples} bootstrap samples"]
    flagged = [d for d in c.cases if d.verdict != "within noise"]
    lines.append(f"{len(flagged)} of {len(c.cases)} case deltas beyond the noise; "
                 f"regressed models: {', '.join(d.model_id for d in c.regressions) or 'none'}")
    lines += c.unmatched
    return lines


def render_comparison(c: Comparison, output: str) -> str:
    if output == "json":
        return json.dumps(c.to_json(), sort_keys=True)
    rows = _rows(c)
    if output == "markdown":
        return render_markdown(HEADERS, rows) + "\n" + "\n".join(f"- {line}" for line in _summary(c))
    return render_table(HEADERS, rows) + "\n" + "\n".join(_summary(c))
