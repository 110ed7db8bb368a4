"""The text form of a campaign report: header, per-row table, per-model summary, problems."""

from __future__ import annotations

from collections.abc import Sequence

from clawstore.costs import CostSum
from clawstore.report.data import CampaignReport


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _latency(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _verdict(passed: bool | None) -> str:
    return "n/a" if passed is None else ("pass" if passed else "fail")


def _cost(value: CostSum) -> str:
    return value.cell(5)  # `?` unknown, `≥x` partly unknown


def _sources(cost: CostSum) -> str:
    """Where the costs came from, as `claw plan`'s COST_FROM: "reported:4 priced:2 unknown:1"."""
    return " ".join(f"{name}:{n}" for name, n in cost.sources().items()) or "-"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """Two-space separated columns under a dash rule; `right` marks right-aligned (numeric) columns."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w)
                         for c, w, r in zip(cells, widths, right, strict=True)).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


Section = tuple[str, list[str], list[list[str]], list[bool]]  # title, headers, rows, right-aligned


def header_lines(report: CampaignReport) -> list[str]:
    total = report.run_cost + report.eval_cost
    return [
        *([report.untrusted_line] if report.untrusted_line else []),
        f"Campaign: {report.campaign_id}",
        f"Suite: {report.suite_id}  Run profile: {report.run_profile_id}  "
        f"Evaluation profile: {report.evaluation_profile_id or 'n/a'}",
        f"Head: build {report.build_id} ({report.state}; started {report.started_at}, "
        f"finished {report.finished_at or 'n/a'})",
        f"Models: {len(report.models)}  Rows: {len(report.rows)}",
        f"Cost (USD): runs {_cost(report.run_cost)}  evaluation {_cost(report.eval_cost)}  "
        f"total {total.text(5)}",
    ]


def sections(report: CampaignReport) -> list[Section]:
    """The report's tables, for the plain text and the terminal rendering alike."""
    verdicts = report.has_verdicts
    headers = ["MODEL", "CASE", "REPS", "RUN", "EVAL", "SCORE", *(["PASS"] if verdicts else []), "TOKENS_IN",
               "TOKENS_OUT", "LATENCY_S", "RUN_COST", "EVAL_COST", "TOTAL_COST", "STATUS"]
    rows = [[r.model_id, r.case_id, str(r.repetitions), r.run_action, r.eval_action or "-", _score(r.score),
             *([_verdict(r.passed)] if verdicts else []), str(r.input_tokens), str(r.output_tokens),
             _latency(r.latency_s), _cost(r.run_cost), _cost(r.eval_cost), _cost(r.total_cost),
             r.status] for r in report.rows]
    right = [False, False, True, False, False, True, *([False] if verdicts else []), True, True, True, True, True,
             True, False]
    out: list[Section] = [("Case Results", headers, rows, right)]
    if report.has_dimensions:
        dims = list(report.rows[0].dimensions)
        rows = [[r.model_id, r.case_id, *(_score(r.dimensions.get(d)) for d in dims)] for r in report.rows]
        out.append(("Dimension Scores (0-10, mean of the final scores)", ["MODEL", "CASE", *(d.upper() for d in dims)],
                    rows, [False, False] + [True] * len(dims)))
    headers = ["MODEL", "CASES", "SCORED", "MEAN_SCORE", *(["PASSED"] if verdicts else []), "TOKENS_IN",
               "TOKENS_OUT", "MEAN_LATENCY_S", "RUNS_EXEC", "RUNS_REUSE", "RUNS_FAILED", "RUN_COST", "EVAL_COST",
               "TOTAL_COST", "COST_FROM"]
    rows = [[m.model_id, str(m.cases), str(m.scored), _score(m.mean_score),
             *([f"{m.passed}/{m.judged}"] if verdicts else []), str(m.input_tokens), str(m.output_tokens),
             _latency(m.mean_latency_s), str(m.runs_executed), str(m.runs_reused), str(m.runs_failed),
             _cost(m.run_cost), _cost(m.eval_cost), _cost(m.total_cost), _sources(m.total_cost)]
            for m in report.models]
    out.append(("Model Summary", headers, rows, [False] + [True] * (len(headers) - 2) + [False]))
    return out


def problem_lines(report: CampaignReport) -> list[str]:
    problems = [(r, p) for r in report.rows for p in r.problems]
    if not problems:
        return []
    return [f"Problems ({len(problems)})", *(f"  {r.model_id} / {r.case_id}: {p}" for r, p in problems)]


def render_text(report: CampaignReport) -> str:
    lines = header_lines(report)
    for title, headers, rows, right in sections(report):
        lines += ["", title, *table(headers, rows, right)]
    problems = problem_lines(report)
    if problems:
        lines += ["", *problems]
    return "\n".join(lines) + "\n"


def print_terminal(report: CampaignReport) -> None:
    """The same report drawn with rich for a person at a terminal."""
    from rich.text import Text

    from clawstore.report.terminal import print_tables
    from clawstore.report.terminal import table as rich_table

    parts: list[object] = ["\n".join(header_lines(report))]
    parts += [rich_table(headers, rows, right, title=title, zero_dim=True) for title, headers, rows, right
              in sections(report)]
    problems = problem_lines(report)
    if problems:
        parts += [Text(problems[0], style="bold red"), "\n".join(problems[1:])]
    print_tables(*parts)
