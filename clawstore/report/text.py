"""The text form of a campaign report: header, per-row table, per-model summary, problems."""

from __future__ import annotations

from collections.abc import Sequence

from clawstore.report.data import CampaignReport


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _latency(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _verdict(passed: bool | None) -> str:
    return "n/a" if passed is None else ("pass" if passed else "fail")


def _cost(value: float) -> str:
    return f"{value:.5f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Two-space separated columns under a dash rule; `right` marks right-aligned (numeric) columns."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w)
                         for c, w, r in zip(cells, widths, right, strict=True)).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def render_text(report: CampaignReport) -> str:
    total = report.run_cost_usd + report.eval_cost_usd
    lines = [
        f"Campaign: {report.campaign_id}",
        f"Suite: {report.suite_id}  Run profile: {report.run_profile_id}  "
        f"Evaluation profile: {report.evaluation_profile_id or 'n/a'}",
        f"Head: build {report.build_id} ({report.state}; started {report.started_at}, "
        f"finished {report.finished_at or 'n/a'})",
        f"Models: {len(report.models)}  Rows: {len(report.rows)}",
        f"Cost (USD): runs {_cost(report.run_cost_usd)}  evaluation {_cost(report.eval_cost_usd)}  "
        f"total {_cost(total)}",
        "",
        "Case Results",
    ]
    verdicts = report.has_verdicts
    headers = ["MODEL", "CASE", "REPS", "RUN", "EVAL", "SCORE", *(["PASS"] if verdicts else []), "TOKENS_IN",
               "TOKENS_OUT", "LATENCY_S", "RUN_COST", "EVAL_COST", "TOTAL_COST", "STATUS"]
    rows = [[r.model_id, r.case_id, str(r.repetitions), r.run_action, r.eval_action or "-", _score(r.score),
             *([_verdict(r.passed)] if verdicts else []), str(r.input_tokens), str(r.output_tokens),
             _latency(r.latency_s), _cost(r.run_cost_usd), _cost(r.eval_cost_usd), _cost(r.total_cost_usd),
             r.status] for r in report.rows]
    right = [False, False, True, False, False, True, *([False] if verdicts else []), True, True, True, True, True,
             True, False]
    lines += table(headers, rows, right)
    if report.has_dimensions:
        lines += ["", "Dimension Scores (0-10, mean of the final scores)"]
        dims = list(report.rows[0].dimensions)
        rows = [[r.model_id, r.case_id, *(_score(r.dimensions.get(d)) for d in dims)] for r in report.rows]
        lines += table(["MODEL", "CASE", *(d.upper() for d in dims)], rows, [False, False] + [True] * len(dims))
    lines += ["", "Model Summary"]
    headers = ["MODEL", "CASES", "SCORED", "MEAN_SCORE", *(["PASSED"] if verdicts else []), "TOKENS_IN",
               "TOKENS_OUT", "MEAN_LATENCY_S", "RUNS_EXEC", "RUNS_REUSE", "RUNS_FAILED", "RUN_COST", "EVAL_COST",
               "TOTAL_COST"]
    rows = [[m.model_id, str(m.cases), str(m.scored), _score(m.mean_score),
             *([f"{m.passed}/{m.judged}"] if verdicts else []), str(m.input_tokens), str(m.output_tokens),
             _latency(m.mean_latency_s), str(m.runs_executed), str(m.runs_reused), str(m.runs_failed),
             _cost(m.run_cost_usd), _cost(m.eval_cost_usd), _cost(m.total_cost_usd)] for m in report.models]
    lines += table(headers, rows, [False] + [True] * (len(headers) - 1))
    problems = [(r, p) for r in report.rows for p in r.problems]
    if problems:
        lines += ["", f"Problems ({len(problems)})"]
        lines += [f"  {r.model_id} / {r.case_id}: {p}" for r, p in problems]
    return "\n".join(lines) + "\n"
