"""What `claw view` shows, collected from the store alone: the report's numbers plus each run's detail.

The summary (leaderboard, matrix, filters) is embedded in the page; each run's detail (conversation, checks,
judge reasoning, aggregation) is made a batch of runs at a time, streamed into the detail shards the page loads
when a run's page is opened (view_page.py). Layout and bounds: docs/view.md.
"""

from __future__ import annotations

import functools
import io
import itertools
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from clawstore.errors import CorruptObjectError, MissingObjectError
from clawstore.report.data import CampaignReport, ReportRow, build_report
from clawstore.report.stats import paired_vs_baseline, stats_json
from clawstore.report.view_names import UNKNOWN, ManifestField, manifest_fields
from clawstore.report.view_page import page_json
from clawstore.store import documents
from clawstore.store.documents import HeadNode, Metrics, damaged
from clawstore.store.headdoc import iter_parts, node_with_action
from clawstore.values import jsontext
from clawstore.values.costs import CostSum, source_of

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader

MAX_TEXT = 20_000  # characters of one message or tool output kept in the page; the store keeps all
READ_RUNS = 256  # runs whose records and bodies are read (in bulk) and held at once


# The top-level fields a run page reads of the bodies it shows (an artifact's trace, the checks, a judgement's scores):
# the rest of each is skipped unparsed (an artifact's request and provider metadata were most of the time spent
# decoding it). A record is parsed whole: most of it is what the page reads.
BODY_FIELDS = ("trace", "checks", "scores")


class _Objects:
    """The objects one batch of runs names, read in bulk (get_many_bytes) and parsed, each in full or to `fields` (a
    JSON object: a dict of those it has; anything else: as parsed in full): a few hundred runs' records and bodies at a
    time, never the campaign's."""

    def __init__(self, store: StoreReader, oids: Iterable[Any], fields: tuple[str, ...] | None = None):
        self._store = store
        self._json: dict[str, Any] = {}
        self.add(oids, fields)

    def add(self, oids: Iterable[Any], fields: tuple[str, ...] | None = None) -> None:
        """Read `oids` too, in bulk."""
        wanted = sorted({oid for oid in oids if isinstance(oid, str) and oid and oid not in self._json})
        for oid, data in self._store.get_many_bytes(wanted).items():
            try:
                self._json[oid] = _fields_of(data, fields) if fields else jsontext.loads(data)
            except ValueError:
                self._json[oid] = None  # not JSON: the page says "not stored"

    def text(self, oid: Any) -> str | None:
        """An object's text, its first MAX_TEXT characters (None: no such object)."""
        if not isinstance(oid, str) or not oid:
            return None
        try:
            with io.BufferedReader(self._store.open_object(oid)) as stream:  # (whole reads: the raw one may be short)
                text = stream.read(4 * MAX_TEXT).decode("utf-8", errors="replace")  # (a UTF-8 character: ≤ 4 bytes)
                more = len(text) > MAX_TEXT or bool(stream.read(1))
        except (MissingObjectError, CorruptObjectError):
            return None
        return text[:MAX_TEXT] + (f"\n… (the rest is in the store: claw cat {oid})" if more else "")

    def maybe_json(self, oid: Any) -> Any:
        if not isinstance(oid, str) or not oid:
            return None
        if oid in self._json:
            return self._json[oid]
        try:  # left out of the bulk read (absent, too large): get_json says why, and we show "not stored"
            return self._store.get_json(oid)
        except (MissingObjectError, ValueError):
            return None


def _fields_of(data: bytes, fields: tuple[str, ...]) -> Any:
    """The JSON object `data` as a dict of those of `fields` it has; anything else parsed in full (ValueError: not
    JSON)."""
    try:
        found = _decoder(fields).decode(data)
    except (ValueError, RecursionError):  # not an object, or what msgspec refuses (jsontext.loads says)
        return jsontext.loads(data)
    return {name: value for name in fields if (value := getattr(found, name)) is not msgspec.UNSET}


@functools.cache
def _decoder(fields: tuple[str, ...]) -> msgspec.json.Decoder[Any]:
    """A decoder of a JSON object to `fields` alone (each any JSON value, UNSET when absent), the others skipped."""
    return msgspec.json.Decoder(msgspec.defstruct("Fields", [(name, Any, msgspec.UNSET) for name in fields]))


@dataclass
class ViewData:
    """The page's summary (its rows' `runs` are filled in as the details are written) and, for each campaign,
    the head whose runs' details go into the shards."""

    summary: dict[str, Any]
    head_ids: list[str] = field(default_factory=list)
    manifest: Path | None = None  # the query manifest the report's rows came from (run_details reads it too)


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + f"\n… ({len(value) - MAX_TEXT} more characters in the store)"
    return value


def conversation(artifact: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The trace as the page draws it: messages, tool calls with their arguments, tool results.

    The trace also echoes each tool result as a `tool` message and the last answer as `final_output`;
    the page shows each once."""
    out: list[dict[str, Any]] = []
    for event in (artifact or {}).get("trace") or []:
        kind = event.get("event_type")
        if kind == "message":
            if event.get("role") == "tool" or event.get("content") in (None, ""):
                continue
            out.append({"type": "message", "role": event.get("role"), "content": _clip(event.get("content"))})
        elif kind == "tool_call":
            args = event.get("parsed_arguments")
            out.append({"type": "tool_call", "id": event.get("call_id"), "tool": event.get("tool_name"),
                        "arguments": _clip(args if args is not None else event.get("raw_arguments"))})
        elif kind == "tool_result":
            out.append({"type": "tool_result", "id": event.get("call_id"), "status": event.get("status"),
                        "output": _clip(event.get("output"))})
        elif kind == "final_output":
            content = _clip(event.get("content"))
            if out and out[-1].get("role") == "assistant" and out[-1].get("content") == content:
                out[-1] = {"type": "final", "content": content}
            else:
                out.append({"type": "final", "content": content})
        elif kind == "runner":
            out.append({"type": "runner", "name": event.get("name"), "detail": _clip(event.get("detail"))})
    return out


def _judgement(record: Mapping[str, Any], store: _Objects) -> dict[str, Any]:
    summary = record.get("summary") or {}
    address = record.get("address") or {}
    body = store.maybe_json((record.get("outputs") or {}).get("judgement")) or {}
    scores = body.get("scores") or {}
    evidence = scores.get("evidence") or {}
    dims = scores.get("dimensions") or summary.get("dimensions") or {}
    error = record.get("error") or {}
    return {
        "judge_run_id": address.get("judge_run_id"), "repetition": address.get("judge_repetition"),
        "judge_model": summary.get("judge_model"), "status": record.get("status"),
        "overall": scores.get("overall_score", summary.get("overall_score")),
        "summary": _clip(scores.get("summary")),
        "overall_evidence": [_clip(e) for e in scores.get("overall_evidence") or []],
        "dimensions": {d: {"score": s, "evidence": [_clip(e) for e in evidence.get(d) or []]}
                       for d, s in dims.items()},
        "error": error.get("message") or error.get("code"),
        **_node_cost(record),
    }


def _checks(record: Mapping[str, Any] | None, store: _Objects) -> list[dict[str, Any]]:
    if record is None:
        return []
    body = store.maybe_json((record.get("outputs") or {}).get("checks")) or {}
    found = body.get("checks") or (record.get("summary") or {}).get("checks") or []
    return [{"check_id": c.get("check_id"), "kind": c.get("kind") or c.get("type"),
             "outcome": c.get("outcome") or c.get("status"), "message": _clip(c.get("message")),
             "dimensions": c.get("dimensions") or []} for c in found if isinstance(c, Mapping)]


def _result(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    s = record.get("summary") or {}
    keep = ("final_score", "final_dimensions", "passed", "aggregation_method", "pass_threshold",
            "judge_iterations", "judge_successful", "checks_total", "checks_passed", "checks_failed")
    return {"status": record.get("status"), **{k: s.get(k) for k in keep}}


def _run_detail(nodes: Sequence[tuple[HeadNode, Mapping[str, Any] | None]], store: _Objects,
                campaign: int) -> dict[str, Any]:
    """One run's page: `nodes` are (head node, record) pairs of the run and its evaluation."""
    by_kind: dict[str, list[tuple[HeadNode | None, Mapping[str, Any] | None]]] = {}
    for node, record in nodes:
        by_kind.setdefault(node.kind, []).append((node, record))
    run_node, run = (by_kind.get("run") or [(None, None)])[0]
    run = run or {}
    address = run_node.address if run_node is not None else {}
    action = run_node.action if run_node is not None else None
    metrics = run.get("metrics") or {}
    spent = Metrics.of(metrics)
    outputs = run.get("outputs") or {}
    artifact = store.maybe_json(outputs.get("artifact"))
    error = run.get("error") or {}
    judges = sorted((_judgement(r, store) for _, r in by_kind.get("judge", []) if r),
                    key=lambda j: (str(j["judge_run_id"]), j["repetition"] or 0))
    checks_record = (by_kind.get("checks") or [({}, None)])[0][1]
    result_record = (by_kind.get("result") or [({}, None)])[0][1]
    eval_cost = CostSum.total(CostSum.of_metrics(r.get("metrics")) for _, r in by_kind.get("judge", []) if r)
    return {
        "campaign": campaign, "model_id": address.get("model_id"), "case_id": address.get("case_id"),
        "repetition": address.get("repetition"), "action": action,
        "status": run.get("status") or ("skipped" if action == "skip" else "missing"),
        "error": error.get("message") or error.get("code"),
        "requested_model": (run.get("summary") or {}).get("requested_model"),
        "tokens": {"input": spent.input_tokens, "output": spent.output_tokens, "reasoning": spent.reasoning_tokens,
                   # (unknown: what it spent at least, `≥` that; absent when nothing is known of them)
                   "input_known": spent.input_tokens_known, "output_known": spent.output_tokens_known},
        "latency_s": spent.latency_s, "run_cost_usd": CostSum.of_metrics(metrics).shown if run else None,
        "run_cost_source": source_of(metrics) if run else None,
        "run_cost_known_usd": CostSum.of_metrics(metrics).shown_known if run else None,  # (unknown: `≥` it, when > 0)
        "eval_cost_usd": eval_cost.shown,
        "eval_cost_sources": eval_cost.sources(), "conversation": conversation(artifact),
        "artifact_stored": artifact is not None, "workspace_diff": store.text(outputs.get("workspace_diff")),
        "checks": _checks(checks_record, store), "judgements": judges,
        "result": _result(result_record),
    }


def _node_cost(record: Mapping[str, Any]) -> dict[str, Any]:
    metrics = record.get("metrics") or {}
    return {"cost_usd": CostSum.of_metrics(metrics).usd, "cost_source": source_of(metrics)}


def _costs(run: CostSum, evaluation: CostSum) -> dict[str, Any]:
    """Costs for the page: numbers (null: a part unknown) and their text ("≥0.00120 (2 of 5 unknown)")."""
    total = run + evaluation
    return {"run_cost_usd": run.shown, "eval_cost_usd": evaluation.shown, "total_cost_usd": total.shown,
            "known_cost_usd": total.shown_known, "run_cost_text": run.text(5), "eval_cost_text": evaluation.text(5),
            "total_cost_text": total.text(5)}


def _campaign_summary(report: CampaignReport) -> dict[str, Any]:
    return {"id": report.campaign_id, "suite_id": report.suite_id, "run_profile_id": report.run_profile_id,
            "evaluation_profile_id": report.evaluation_profile_id, "build_id": report.build_id,
            "state": report.state, "finished_at": report.finished_at, "stopped": report.stopped,
            "state_text": report.state_text,
            # (the report's lines under `Head:`: view.js shows them under the campaign's line; null: nothing to say)
            "coverage": None if report.coverage is None else report.coverage.to_json(),
            "coverage_text": report.coverage.line() if report.coverage is not None else None,
            "cases_differ_text": report.coverage.differ_line() if report.coverage is not None else None,
            **_costs(report.run_cost, report.eval_cost), "untrusted": report.untrusted_line}


class SummaryRows:
    """The summary's rows as the page embeds them, each as its JSON text up to its `runs` (about 230 bytes, where a dict
    of it held ~800), indexed by (campaign, model, case); as the details are numbered, each run's row (4 bytes a run).
    The page's writer takes them a row at a time (`json_pieces`), each with its runs."""

    def __init__(self) -> None:
        self.texts: list[bytes] = []
        self.numbers: dict[RunKey, int] = {}  # (its row number)
        self._run_rows = array("l")  # run i's row number

    def add(self, key: RunKey, row: dict[str, Any]) -> None:
        text = page_json(row)
        assert text.endswith(_NO_RUNS), text[-20:]  # (`runs` last, filled in at the end)
        self.numbers[key] = len(self.texts)
        self.texts.append(text[:-len(_NO_RUNS) + len('"runs":')].encode("ascii"))

    def keep(self, count: int) -> None:
        """Drop the rows added after the first `count` (a report that started over adds its rows again)."""
        del self.texts[count:]
        while len(self.numbers) > count:
            self.numbers.popitem()

    def add_run(self, key: RunKey) -> None:
        """The next run (0, 1, ...) is of the row of `key`."""
        self._run_rows.append(self.numbers[key])

    def __len__(self) -> int:
        return len(self.texts)

    def json_pieces(self) -> Iterator[str]:
        """The rows' JSON list a row at a time, each row's `runs` in run order (a counting sort of the runs by row:
        8 bytes a run and a row while the page is written)."""
        starts = array("l", bytes(8 * (len(self.texts) + 1)))
        for row in self._run_rows:
            starts[row + 1] += 1
        for row in range(len(self.texts)):
            starts[row + 1] += starts[row]
        runs, filled = array("l", bytes(8 * len(self._run_rows))), array("l", starts)
        for run, row in enumerate(self._run_rows):
            runs[filled[row]] = run
            filled[row] += 1
        for row, text in enumerate(self.texts):
            shown = ",".join(map(str, runs[starts[row]:starts[row + 1]]))
            yield f"{',' if row else '['}{text.decode('ascii')}[{shown}]}}"
        yield "]" if self.texts else "[]"


_NO_RUNS = '"runs":[]}'


class _PageRows:
    """build_report's sink for the page: each row as the summary embeds it (SummaryRows; its case by the page's index)
    and, when campaigns are compared, the case scores a comparison reads; not the report's rows."""

    def __init__(self, campaign: int, rows: SummaryRows, cases: dict[str, int], scored: bool) -> None:
        self.campaign, self.rows, self.cases, self.scored = campaign, rows, cases, scored
        self.scores: dict[str, dict[str, float]] = {}
        self.count = 0

    def add(self, row: ReportRow) -> None:
        self.rows.add((self.campaign, row.model_id, row.case_id), {
            "campaign": self.campaign, "model_id": row.model_id,
            "case": self.cases.setdefault(row.case_id, len(self.cases)), "score": row.score, "passed": row.passed,
            "status": row.status, "latency_s": row.latency_s, "cost_usd": row.total_cost.shown,
            "cost_text": row.total_cost.text(5), "run_action": row.run_action, "eval_action": row.eval_action,
            "problems": row.problems, "runs": []})
        self.count += 1
        if self.scored and row.score is not None:
            self.scores.setdefault(row.model_id, {})[row.case_id] = row.score

    def __len__(self) -> int:
        return self.count


def _page_rows(campaign: int, rows: SummaryRows, cases: dict[str, int], scored: bool) -> Callable[[], _PageRows]:
    """build_report's `sink` for a campaign: made anew if the report starts over, the rows and cases the first try
    added taken away again (the cases' indexes are given in the order the rows come)."""
    held, known = len(rows), len(cases)

    def made() -> _PageRows:
        rows.keep(held)
        while len(cases) > known:
            cases.popitem()
        return _PageRows(campaign, rows, cases, scored)

    return made


def collect(store: StoreReader, campaign_ids: Sequence[str], tags: Mapping[str, Sequence[str]] | None = None,
            manifest: Path | None = None, read: Mapping[str, str | None] | None = None) -> ViewData:
    """The page's summary for one campaign, or a comparison of several (the first is the baseline); `manifest`
    and `read` (a campaign's ref as the caller read it, under a lease) as build_report takes them. The rows' `runs`
    stay empty until run_details fills them."""
    rows = SummaryRows()
    summary: dict[str, Any] = {"campaigns": [], "models": [], "cases": [], "rows": rows, "tags": {}}
    cases: dict[str, int] = {}
    reports, scores = [], []
    for index, campaign_id in enumerate(campaign_ids):
        report = build_report(store, campaign_id, manifest=manifest,
                              sink=_page_rows(index, rows, cases, len(campaign_ids) > 1),
                              read=(read or {}).get(campaign_id))
        page_rows = report.spilled
        assert isinstance(page_rows, _PageRows)
        reports.append(report)
        scores.append(page_rows.scores)
        summary["campaigns"].append(_campaign_summary(report))
        for m in report.models:
            summary["models"].append({
                "campaign": index, "model_id": m.model_id, "cases": m.cases, "scored": m.scored,
                "expected_cases": _expected_cases(report, m.model_id),
                "mean_score": m.mean_score, "passed": m.passed, "verdicts": m.judged,
                "pass_rate": m.passed / m.judged if m.judged else None, "mean_latency_s": m.mean_latency_s,
                "runs_executed": m.runs_executed, "runs_reused": m.runs_reused, "runs_failed": m.runs_failed,
                **_costs(m.run_cost, m.eval_cost), **stats_json(report.stats, m.model_id)})
    summary["judge_reliability"] = [{"campaign": i, **j.to_json()} for i, r in enumerate(reports)
                                    for j in r.judge_reliability]
    summary["paired"] = paired_vs_baseline(scores)
    summary["cases"] = list(cases)
    summary["tags"] = {case: list(tags.get(case, ())) for case in cases} if tags else {}
    return ViewData(summary, [r.head_id for r in reports], manifest)


def _expected_cases(report: CampaignReport, model: str) -> int | None:
    """The cases a model expects, for the leaderboard's `Cases` cell ("1 of 3"); None: not said (an older head), or a
    model the campaign no longer has."""
    coverage = report.coverage
    return coverage.expected_cases if coverage is not None and model in coverage.held else None


def run_details(store: StoreReader, data: ViewData) -> Iterator[dict[str, Any]]:
    """Every run's detail in the order of the campaigns' heads, its records and bodies read `READ_RUNS` runs at a
    time; as each is yielded it is numbered (0, 1, ...) in its row's `runs`."""
    rows = row_index(data)
    summary_rows: SummaryRows = data.summary["rows"]
    for _, keys, details in run_shards(store, data.head_ids, data.manifest, rows, READ_RUNS):
        for key, detail in zip(keys, details or (), strict=True):
            summary_rows.add_run(key)
            yield detail


def row_index(data: ViewData) -> dict[RunKey, int]:
    """The summary's rows by (campaign, model, case): the keys run_shards is given."""
    rows: SummaryRows = data.summary["rows"]
    return rows.numbers


RunKey = tuple[int, str, str]  # (campaign, model, case) of a summary row


def run_shards(store: StoreReader, head_ids: Sequence[str], manifest: Path | None, rows: Container[RunKey], per: int,
               make: Callable[[int], bool] = lambda number: True
               ) -> Iterator[tuple[int, list[RunKey], list[dict[str, Any]] | None]]:
    """(number, each run's row key, their details) of each `per` runs in the order of the heads' runs that have a row
    (a shard may hold the end of one head and the start of the next), numbered 0, 1, ...; the details only of the
    numbers `make` takes (None for the others: their runs are counted, no record read). Records and bodies are read
    `READ_RUNS` runs of one head at a time."""
    opened: list[ManifestField] = []
    runs = _heads_runs(store, head_ids, manifest, rows, opened)
    try:
        for number in itertools.count():
            shard = list(itertools.islice(runs, per))
            if not shard:
                return
            keys = [key for key, _, _ in shard]
            if not make(number):
                yield number, keys, None
                continue
            details = []
            for _, run_names in itertools.groupby(shard, key=lambda run: id(run[2])):
                head_runs = list(run_names)
                for at in range(0, len(head_runs), READ_RUNS):
                    batch = head_runs[at:at + READ_RUNS]
                    records, bodies = _batch_records(store, [node for _, nodes, _ in batch for node in nodes],
                                                     batch[0][2])
                    shown = iter(records)
                    details += [_run_detail([(node, next(shown)) for node in nodes], bodies, key[0])
                                for key, nodes, _ in batch]
            yield number, keys, details
    finally:  # (a head whose last cases the manifest lacks, or a page abandoned: its streams are not drained)
        for lookup in opened:
            lookup.close()


def _heads_runs(store: StoreReader, head_ids: Sequence[str], manifest: Path | None, rows: Container[RunKey],
                opened: list[ManifestField]
                ) -> Iterator[tuple[RunKey, list[HeadNode], tuple[ManifestField, ManifestField]]]:
    """(row key, nodes, the head's manifest lookups) of each run of the heads that has a row, in their order; each
    head's lookups added to `opened` (the caller closes them: a shard's are used after the head's last run is met)."""
    for campaign, head_id in enumerate(head_ids):
        top = store.get_json(head_id)
        names = manifest_fields(manifest, head_id, top.get("node_count") if isinstance(top, dict) else None)
        opened += names
        for key, nodes in _runs_of_head(store, head_id, top):
            if (campaign, *key) in rows:
                yield (campaign, *key), nodes, names


def _batch_records(store: StoreReader, nodes: list[HeadNode], names: tuple[ManifestField, ManifestField]
                   ) -> tuple[list[Mapping[str, Any] | None], _Objects]:
    """Each node's record as the page reads it (its planning view, with what the manifest holds of the record, when
    that is all the page reads of it: three of the four records a run has, never read; else the record itself) and
    the bodies they name, read in bulk; each node's planning view looked at once."""
    planned = _present(store, nodes, [_planned(node, names) for node in nodes])
    records = _Objects(store, (node.record for node, view in zip(nodes, planned, strict=True) if view is None))
    bodies = _Objects(store, (oid for node, view in zip(nodes, planned, strict=True)
                              for oid in _body_ids(view if view is not None else records.maybe_json(node.record))),
                      BODY_FIELDS)
    standing = [view if view is not None and _stands(node.kind, view, bodies) else None
                for node, view in zip(nodes, planned, strict=True)]
    records.add(node.record for node, view, stand in zip(nodes, planned, standing, strict=True)
                if view is not None and stand is None)
    return [stand if stand is not None else records.maybe_json(node.record)
            for node, stand in zip(nodes, standing, strict=True)], bodies


def _planned(node: HeadNode, names: tuple[ManifestField, ManifestField]) -> dict[str, Any] | None:
    """The planning view a head keeps of a node's record (`record_doc`: its status, outputs, metrics, error, as the
    record has them), with what else the page may read of that record: of a checks record, its summary's checks only
    when its body has none (`_stands`); of a run's, its summary's `requested_model`, and of a judgement's its
    `judge_model` (the manifest's, when it answers exactly) and its address (the head node's: the judge run and
    repetition are part of the node's key). None for a result's record (the page reads its summary), when the manifest
    does not answer, and for a record fsck --repair took away: the record is read."""
    doc = node.record_doc
    if node.kind not in ("checks", *_NAMED) or not isinstance(node.record, str) or node.quarantined is not None or not (
            isinstance(doc, dict) and isinstance(doc.get("outputs"), dict)):
        return None
    if node.kind == "checks":
        return doc
    lookup = names[_NAMED[node.kind]]
    value = lookup.get(node.record, node.address.get("case_id"))
    if value is UNKNOWN:
        return None
    view = {**doc, "summary": {lookup.field: value}}
    if node.kind == "judge":
        view["address"] = node.address
    return view


_NAMED = {"run": 0, "judge": 1}  # kinds whose planning view stands in with a field from the manifest: which of `names`


def _present(store: StoreReader, nodes: list[HeadNode], planned: list[dict[str, Any] | None]
             ) -> list[dict[str, Any] | None]:
    """`planned`, but a run's or judgement's record not in the store is read (and shown "not stored") as before: one
    bulk look at the index, no read. (A checks view stands for its record as it did, present or not.)"""
    pairs = list(zip(nodes, planned, strict=True))
    asked = [node.record for node, view in pairs if view is not None and node.kind != "checks"]
    gone = set(store.missing(asked)) if asked else set()
    return [None if view is not None and node.record in gone else view for node, view in pairs]


def _stands(kind: str, view: Mapping[str, Any], bodies: _Objects) -> bool:
    """Whether the view has all the page reads of its record, once its body is read: a checks body holding the checks;
    a judgement's scores holding the overall score and the dimensions (else the record's summary's are shown)."""
    if kind == "run":
        return True
    body = bodies.maybe_json(view["outputs"].get("checks" if kind == "checks" else "judgement"))
    if kind == "checks":
        return bool((body or {}).get("checks"))
    scores = body.get("scores") if isinstance(body, dict) else None
    return isinstance(scores, dict) and "overall_score" in scores and bool(scores.get("dimensions"))


def _body_ids(record: Any) -> list[Any]:
    """The objects a run page shows of a record: a run's artifact, the checks' and judgement's bodies."""
    outputs = record.get("outputs") if isinstance(record, Mapping) else None
    return [outputs.get(name) for name in ("artifact", "checks", "judgement")] if isinstance(outputs, Mapping) else []


class _Node(msgspec.Struct, gc=False):
    """A head node as a part is decoded straight to it, typed as documents.read_head_node checks a node (a string is
    a str, an object a dict, null or absent None; its other fields skipped): HeadNode's fields but `stored`, which
    the view does not read. Half the time of a head's walk, which each of the view's two processes makes whole."""

    kind: str
    key: str
    address: dict[str, Any]
    record: str | None = None
    action: str | None = None
    record_doc: dict[str, Any] | None = None
    quarantined: str | None = None


class _Part(msgspec.Struct, gc=False):
    nodes: list[_Node]


_PART = msgspec.json.Decoder(_Part)


def _part(store: StoreReader, part_id: str) -> Any:
    """A head part, its nodes `_Node`s; what that decoder refuses (another shape, a field of another type, JSON only
    Python's parser reads) as `get_json` parses it, for read_head to judge as before."""
    data = store.get_bytes(part_id)
    try:
        return {"nodes": _PART.decode(data).nodes}
    except (ValueError, RecursionError):  # (msgspec's errors are ValueErrors)
        return store.get_json(part_id)


def _with_action(node: Any, action: Any) -> Any:
    if isinstance(node, _Node):
        if action is not None:
            node.action = action
        return node
    return node_with_action(node, action)


def _head_nodes(store: StoreReader, head_id: str, top: Any) -> Iterator[HeadNode | _Node]:
    """The head's nodes in its order, typed: a part decoded to `_Node`s as it stands (its actions checked as
    read_head_node checks them), any other through read_head (its one-line error for a hostile one)."""
    for at, part in enumerate(iter_parts(top, lambda oid: _part(store, oid), _with_action)):
        where = f"campaign head {head_id} part {at}"
        if part and all(isinstance(node, _Node) for node in part):
            for index, node in enumerate(part):
                if node.action is not None and type(node.action) is not str:
                    raise damaged(where, f"nodes[{index}].action", "a string or null")
            yield from part
        else:
            yield from documents.read_head({"nodes": part}, where).nodes


def _runs_of_head(store: StoreReader, head_id: str, top: Any) -> Iterator[tuple[tuple[str, str], list[HeadNode]]]:
    """((model, case), nodes) of each run of the head (its run node and the nodes evaluating it), in repetition
    order. A head lists its nodes case by case (headdoc.split_nodes), so one case's nodes are held at a time; a
    case met again later (a head written otherwise) gives its runs again, with the nodes found there."""
    case: str | None = None
    held: dict[tuple[str, int], list[HeadNode]] = {}
    for node in _head_nodes(store, head_id, top):
        address = node.address
        model, case_id, repetition = address.get("model_id"), address.get("case_id"), address.get("repetition")
        if model is None or case_id is None:
            continue
        if case_id != case:
            yield from (((m, case), held[(m, r)]) for m, r in sorted(held) if case is not None)
            case, held = case_id, {}
        held.setdefault((model, int(repetition or 0)), []).append(node)
    yield from (((m, case), held[(m, r)]) for m, r in sorted(held) if case is not None)
