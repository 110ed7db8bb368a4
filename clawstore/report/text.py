"""The text form of a campaign report: header, per-row table, per-model summary, problems."""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from clawstore.report.data import CampaignReport, ReportRow
from clawstore.stats.intervals import Interval
from clawstore.values.costs import CostSum
from clawstore.values.tokens import token_cell


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
        f"Head: build {report.build_id} ({report.state_text}; started {report.started_at}, "
        f"finished {report.finished_at or 'n/a'})",
        *report.coverage_lines,
        f"Models: {len(report.models)}  Rows: {len(report.rows)}",
        f"Cost (USD): runs {_cost(report.run_cost)}  evaluation {_cost(report.eval_cost)}  "
        f"total {total.text(5)}",
    ]


def _tokens(input_tokens: int, output_tokens: int, unknown: int, runs: int) -> tuple[str, str]:
    """TOKENS_IN and TOKENS_OUT: `≥` what is known when some runs' tokens are unknown, `?` when none is known."""
    return token_cell(input_tokens, unknown, runs), token_cell(output_tokens, unknown, runs)


def sections(report: CampaignReport) -> list[Section]:
    """The report's tables, for the plain text and the terminal rendering alike."""
    verdicts = report.has_verdicts
    headers = ["MODEL", "CASE", "REPS", "RUN", "EVAL", "SCORE", *(["PASS"] if verdicts else []), "TOKENS_IN",
               "TOKENS_OUT", "LATENCY_S", "RUN_COST", "EVAL_COST", "TOTAL_COST", "STATUS"]
    rows = [[r.model_id, r.case_id, str(r.repetitions), r.run_action, r.eval_action or "-", _score(r.score),
             *([_verdict(r.passed)] if verdicts else []), *_tokens(r.input_tokens, r.output_tokens, r.tokens_unknown,
                                                                  r.run_cost.count),
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
    coverage = report.coverage if report.coverage is not None and report.coverage.cases_differ else None
    headers = ["MODEL", "CASES", *(["COVERAGE"] if coverage else []), "SCORED", "MEAN_SCORE",
               *(["PASSED"] if verdicts else []), "TOKENS_IN", "TOKENS_OUT", "MEAN_LATENCY_S", "RUNS_EXEC",
               "RUNS_REUSE", "RUNS_FAILED", "RUN_COST", "EVAL_COST", "TOTAL_COST", "COST_FROM"]
    rows = [[m.model_id, str(m.cases), *([coverage.cell(m.model_id, m.cases)] if coverage else []), str(m.scored),
             _score(m.mean_score),
             *([f"{m.passed}/{m.judged}"] if verdicts else []),
             *_tokens(m.input_tokens, m.output_tokens, m.tokens_unknown, m.run_cost.count),
             _latency(m.mean_latency_s), str(m.runs_executed), str(m.runs_reused), str(m.runs_failed),
             _cost(m.run_cost), _cost(m.eval_cost), _cost(m.total_cost), _sources(m.total_cost)]
            for m in report.models]
    out.append(("Model Summary", headers, rows, [False] + [True] * (len(headers) - 2) + [False]))
    return out + stats_sections(report)


def _range(interval: Interval | None, fmt: str = ".2f") -> str:
    if interval is None or interval.low is None or interval.high is None:
        return "n/a"
    return f"[{interval.low:{fmt}}, {interval.high:{fmt}}]"


def _share(interval: Interval | None) -> list[str]:
    """A proportion and its interval, in percent."""
    return ["n/a", "n/a"] if interval is None else [f"{interval.mean:.1%}", _range(interval, ".1%")]


def stats_sections(report: CampaignReport) -> list[Section]:
    """Each model's means with their 95 % intervals and n, then the judges' self-agreement."""
    verdicts = report.has_verdicts
    with_k = [s.pass_k for s in report.stats.values() if s.pass_k]
    k = max(p.k for p in with_k) if with_k else 0
    headers = ["MODEL", "N", "MEAN_SCORE", "SCORE_95CI", *(["PASS_RATE", "PASS_95CI"] if verdicts else []),
               *([f"PASS@{k}", "95CI", f"PASS^{k}", "95CI"] if k else [])]
    rows = []
    for model, found in report.stats.items():
        score = found.score
        rows.append([model, str(score.n if score else 0), _score(score.mean if score else None), _range(score),
                     *(_share(found.pass_rate) if verdicts else []),
                     *([*_share(found.pass_k.at_k if found.pass_k else None),
                        *_share(found.pass_k.all_k if found.pass_k else None)] if k else [])])
    scored = any(found.score or found.pass_rate for found in report.stats.values())  # (none: a runs-only campaign)
    out: list[Section] = [("Model Statistics (95% intervals over cases: scores t, pass rates Wilson)", headers, rows,
                           [False] + [True] * (len(headers) - 1))] if scored else []
    names = list(dict.fromkeys(d for found in report.stats.values() for d in found.dimensions))
    dims = [[model, str(max((i.n for i in found.dimensions.values()), default=0)),
             *(found.dimensions[d].text() if d in found.dimensions else "n/a" for d in names)]
            for model, found in report.stats.items()]
    if names:
        out.append(("Dimension Means (95% intervals over cases)", ["MODEL", "N", *(d.upper() for d in names)], dims,
                    [False] + [True] * (len(names) + 1)))
    judges = [[j.judge_run_id, j.dimension, str(j.reliability.runs), str(j.judge_repetitions),
               f"{j.reliability.mad:.2f}", "n/a" if j.reliability.icc is None else f"{j.reliability.icc:.2f}",
               "n/a" if j.reliability.flip_share is None else f"{j.reliability.flip_share:.1%}"]
              for j in report.judge_reliability]
    if judges:
        out.append(("Judge Reliability (its repetitions of the same run)",
                    ["JUDGE", "DIMENSION", "RUNS", "REPS", "MEAN_ABS_DIFF", "ICC", "VERDICT_FLIPS"], judges,
                    [False, False, True, True, True, True, True]))
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


JSON_ROWS = 1000  # rows encoded at once by json_chunks and JsonRows


def json_chunks(report: CampaignReport) -> Iterator[str]:
    """The text of json.dumps(report.to_json(), indent=2, sort_keys=True), its rows encoded JSON_ROWS at a time (or read
    back from where build_report spilled them: JsonRows): the document is never held whole (on 50,000 rows, hundreds of
    MB)."""
    encoder = json.JSONEncoder(indent=2, sort_keys=True)
    spilled = report.spilled if isinstance(report.spilled, JsonRows) else None
    rows = report.rows
    if not rows and not spilled:
        yield encoder.encode(report.to_json())
        return
    mark = f'    "{uuid.uuid4().hex}"'  # where the rows go (a string no report holds: a fresh random id)
    before, after = encoder.encode({**report.to_json(rows=False), "rows": [mark.strip()[1:-1]]}).split(mark)
    yield before
    if spilled is not None:
        yield from spilled.text()
    for start in range(0, len(rows), JSON_ROWS):
        yield _rows_text(rows[start:start + JSON_ROWS]) + (",\n" if start + JSON_ROWS < len(rows) else "")
    yield after


def _rows_text(rows: Sequence[ReportRow]) -> str:
    """The rows as the whole document's encoder writes them: one level deeper than a list of their own."""
    return indented([row.to_json() for row in rows], "  ")[2:-4]  # ("[\n" and "\n  ]")


class JsonRows:
    """A report's rows as json_chunks writes them, encoded JSON_ROWS at a time into a temporary file as they come
    (build_report's `sink`): the report folds its summaries, which come first in the JSON, without holding them."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile("w+", encoding="utf-8", newline="")
        self._pending: list[ReportRow] = []
        self._count = 0

    def add(self, row: ReportRow) -> None:
        self._pending.append(row)
        self._count += 1
        if len(self._pending) == JSON_ROWS:
            self._flush()

    def __len__(self) -> int:
        return self._count

    def _flush(self) -> None:
        if self._pending:
            self._file.write((",\n" if self._count > len(self._pending) else "") + _rows_text(self._pending))
            self._pending = []

    def close(self) -> None:
        self._file.close()

    def text(self) -> Iterator[str]:
        """The rows' text, a part at a time; the file is closed after."""
        self._flush()
        with self._file:
            self._file.seek(0)
            while part := self._file.read(1 << 16):
                yield part


_COMPACT = json.JSONEncoder(sort_keys=True)
_INDENTED = json.JSONEncoder(indent=2, sort_keys=True)


def indented(value: Any, indent: str) -> str:
    """`json.JSONEncoder(indent=2, sort_keys=True).encode(value)` with every line after the first `indent` deeper, made
    by the C encoder and msgspec's formatter, which copies each string and number as written (the pure-Python encoder
    that `indent` takes was most of the JSON's time: 50,000 rows 1.1 s, this 0.2 s). What msgspec refuses to read (a
    NaN, a lone surrogate escape) takes the pure-Python encoder."""
    try:
        text = msgspec.json.format(_COMPACT.encode(value), indent=2)
    except msgspec.DecodeError:
        text = _INDENTED.encode(value)
    return text.replace("\n", "\n" + indent)  # (JSON text holds no raw newline)
