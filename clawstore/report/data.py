"""Collect one campaign's report from the store: its head ref, the records it names, nothing else.

No config is read and no provider is called, so a campaign whose configs changed since still reports
its last build. Rows come from the same flattening the manifest uses (clawstore.query.rows), or from
the manifest itself once the head is materialised there (the same rows, read back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import fsum
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError, UsageError
from clawstore.query.heads import materialised_rows, stamped_rows, stored_rows, streamed_rows
from clawstore.query.rows import Row
from clawstore.query.schema import DIMENSIONS
from clawstore.report.stats import (
    JudgeReliability,
    ModelStats,
    judge_reliability,
    model_stats,
    pick,
    stats_json,
    thresholds,
)
from clawstore.store import documents
from clawstore.store.documents import Head
from clawstore.store.headdoc import head_fields, is_parted, read_head_doc
from clawstore.values.canonical import field_values
from clawstore.values.costs import PAID_KINDS, PRICED, REPORTED, SOURCES, UNKNOWN, CostSum, known_cost

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader

EVAL_KINDS = ("checks", "judge", "result")
_OK = {"success", "passed"}


@dataclass
class ReportRow:
    model_id: str
    case_id: str
    repetitions: int
    run_action: str
    eval_action: str | None
    score: float | None
    passed: bool | None
    latency_s: float | None
    run_cost: CostSum  # of the row's runs (reported, priced, unknown: clawstore/values/costs.py)
    eval_cost: CostSum  # of their judgements (checks and results cost nothing)
    status: str
    problems: list[str] = field(default_factory=list)
    input_tokens: int = 0  # of the runs (the judge's tokens are in eval_cost_usd)
    output_tokens: int = 0
    dimensions: dict[str, float | None] = field(default_factory=dict)  # mean final score per dimension
    pass_threshold: float | None = None  # the verdict's threshold; None: no pass/fail

    @property
    def total_cost(self) -> CostSum:
        return self.run_cost + self.eval_cost

    def to_json(self) -> dict[str, Any]:
        return cost_json(field_values(self), self.run_cost, self.eval_cost)


@dataclass
class ModelSummary:
    model_id: str
    cases: int
    scored: int
    mean_score: float | None
    mean_latency_s: float | None
    runs_executed: int
    runs_reused: int
    runs_failed: int
    run_cost: CostSum
    eval_cost: CostSum
    input_tokens: int = 0
    output_tokens: int = 0
    passed: int = 0  # rows with a pass verdict that passed
    judged: int = 0  # rows with a pass verdict

    @property
    def total_cost(self) -> CostSum:
        return self.run_cost + self.eval_cost

    def to_json(self) -> dict[str, Any]:
        return cost_json(field_values(self), self.run_cost, self.eval_cost)


@dataclass
class CampaignReport:
    campaign_id: str
    suite_id: str | None
    run_profile_id: str | None
    evaluation_profile_id: str | None
    head_id: str
    build_id: str | None
    state: str | None
    started_at: str | None
    finished_at: str | None
    rows: list[ReportRow]
    models: list[ModelSummary]
    untrusted_signer: str | None = None  # set when the head was kept apart (imported with --untrusted)
    stats: dict[str, ModelStats] = field(default_factory=dict)  # per model: intervals, pass@k
    judge_reliability: list[JudgeReliability] = field(default_factory=list)

    @property
    def untrusted_line(self) -> str | None:
        if self.untrusted_signer is None:
            return None
        return (f"UNTRUSTED: kept apart, signed by {self.untrusted_signer}; no build reuses these results "
                f"until you claw trust add the signer")

    @property
    def run_cost(self) -> CostSum:
        return CostSum.total(r.run_cost for r in self.rows)

    @property
    def eval_cost(self) -> CostSum:
        return CostSum.total(r.eval_cost for r in self.rows)

    @property
    def has_verdicts(self) -> bool:
        """A pass/fail column is shown when the evaluation profile sets pass_threshold."""
        return any(r.pass_threshold is not None for r in self.rows)

    @property
    def has_dimensions(self) -> bool:
        return any(v is not None for r in self.rows for v in r.dimensions.values())

    def to_json(self, rows: bool = True) -> dict[str, Any]:
        """The report as JSON; `rows` False: its rows left out (an empty list: text.json_chunks writes them)."""
        return {
            "campaign": {"id": self.campaign_id, "suite_id": self.suite_id, "run_profile_id": self.run_profile_id,
                         "evaluation_profile_id": self.evaluation_profile_id},
            "head": {"object": self.head_id, "build_id": self.build_id, "state": self.state,
                     "started_at": self.started_at, "finished_at": self.finished_at},
            "trusted": self.untrusted_signer is None,
            "signer": self.untrusted_signer,
            "rows": [r.to_json() for r in self.rows] if rows else [],
            "models": [{**m.to_json(), **stats_json(self.stats, m.model_id)} for m in self.models],
            "judge_reliability": [j.to_json() for j in self.judge_reliability],
            "totals": cost_json({}, self.run_cost, self.eval_cost),
        }


def cost_json(fields: dict[str, Any], run: CostSum, evaluation: CostSum) -> dict[str, Any]:
    """`fields` with the costs as JSON: each null when a part of it is unknown (never 0), the known part
    of the total, and how many runs and judgements each cost source priced."""
    total = run + evaluation
    out = {name: value for name, value in fields.items() if name not in ("run_cost", "eval_cost")}
    out.update(run_cost_usd=run.usd, eval_cost_usd=evaluation.usd, total_cost_usd=total.usd,
               known_cost_usd=total.known_usd, cost_sources=total.sources())
    return out


def fold_action(actions: Iterable[str | None]) -> str | None:
    """Several nodes behind one row: any failure shows, then any execution, then skip, else reuse."""
    return _folded({a for a in actions if a})


def _folded(seen: set[str]) -> str | None:
    for action in ("fail", "exec", "skip", "reuse"):
        if action in seen:
            return action
    return None


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fsum(present) / len(present) if present else None  # (statistics.fmean, without its checks)


def _means(rows: Sequence[Row], names: Sequence[str]) -> dict[str, float | None]:
    """_mean of each column `names` of `rows`: of one row (one repetition, the common case) without a list for each."""
    if len(rows) == 1:
        only = rows[0]
        return {name: None if (value := only[name]) is None else fsum((value,)) for name in names}
    return {name: _mean(r[name] for r in rows) for name in names}


def _problem(node: Row) -> str | None:
    if node["status"] in _OK or (node["kind"] == "checks" and node["status"] == "failed"):
        if node["action"] != "fail":
            return None
    where = f"rep {node['repetition']}" if node["repetition"] is not None else ""
    if node["kind"] == "judge":
        where += f" judge {node['judge_run_id']}#{node['judge_repetition']}"
    detail = ": ".join(str(p) for p in (node["error_code"], node["error_message"]) if p)
    return f"{node['kind']} {where.strip()}: {node['status'] or node['action']}" + (f" ({detail})" if detail else "")


class _Cost:
    """CostSum.total of paid nodes' costs, added up in the order given (the same float sum), without a CostSum for
    each."""

    __slots__ = ("known", "reported", "priced", "unknown")

    def __init__(self) -> None:
        self.known, self.reported, self.priced, self.unknown = 0.0, 0, 0, 0

    def add(self, node: Row) -> None:
        """A node's cost when it is paid (its row's cost_usd NULL: unknown); as CostSum.of reads it."""
        source = node["cost_source"]
        if source is None or node["kind"] not in PAID_KINDS:
            return
        cost = known_cost(node["cost_usd"])
        if source not in SOURCES:
            source = UNKNOWN if cost is None else REPORTED
        if cost is None or source == UNKNOWN:
            self.unknown += 1
            self.known += 0.0
        else:
            self.known += cost
            self.reported += source == REPORTED
            self.priced += source == PRICED

    def sum(self) -> CostSum:
        return CostSum(self.known, self.reported, self.priced, self.unknown)


def _row(model: str, case: str, nodes: list[Row], results: list[Row]) -> ReportRow:
    """One model × case: its nodes (runs, their evaluations) read in one pass."""
    run_cost, eval_cost = _Cost(), _Cost()
    run_actions: set[str] = set()
    eval_actions: set[str] = set()
    repetitions = set()
    latencies: list[float | None] = []
    problems: list[str] = []
    bad: tuple[list[str], list[str]] = ([], [])  # the runs' statuses not ok, then the results'
    statuses = input_tokens = output_tokens = 0
    for node in nodes:
        kind, status = node["kind"], node["status"]
        if (problem := _problem(node)) is not None:
            problems.append(problem)
        if kind == "run":
            run_cost.add(node)
            if action := node["action"]:
                run_actions.add(action)
            repetitions.add(node["repetition"])
            latencies.append(node["latency_s"])
            input_tokens += node["input_tokens"] or 0
            output_tokens += node["output_tokens"] or 0
        elif kind in EVAL_KINDS:
            eval_cost.add(node)
            if action := node["action"]:
                eval_actions.add(action)
            if kind != "result":
                continue
        else:
            continue
        statuses += 1
        if status not in _OK:
            bad[kind == "result"].append(status or "missing")
    verdicts = [r["passed"] for r in results if r["passed"] is not None]
    return ReportRow(
        model_id=model,
        case_id=case,
        repetitions=len(repetitions),
        run_action=_folded(run_actions) or "-",
        eval_action=_folded(eval_actions),
        score=_mean(r["final_score"] for r in results),
        passed=all(verdicts) if verdicts else None,
        latency_s=_mean(latencies),
        run_cost=run_cost.sum(),
        eval_cost=eval_cost.sum(),
        status=next(iter(bad[0] or bad[1]), "ok" if statuses else "missing"),
        problems=problems,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        dimensions=_means(results, DIMENSIONS),
        pass_threshold=next((r["pass_threshold"] for r in results if r["pass_threshold"] is not None), None),
    )


@dataclass
class _Runs:
    """What a model's summary reads of its run nodes."""

    latencies: list[float | None] = field(default_factory=list)
    executed: int = 0
    reused: int = 0
    failed: int = 0

    def add(self, node: Row) -> None:
        self.latencies.append(node["latency_s"])
        self.executed += node["action"] == "exec"
        self.reused += node["action"] == "reuse"
        self.failed += node["action"] == "fail" or node["status"] not in _OK


def _fold(nodes: Iterable[Row], results: Mapping[tuple[str, str], list[Row]], cases: Sequence[str],
          models: Sequence[str]) -> tuple[list[ReportRow], dict[str, _Runs]]:
    """One row per model × case of `nodes` (given one group after another: a group's nodes held, not all of
    them), sorted; and each model's runs."""
    rows: list[ReportRow] = []
    runs_of: dict[str, _Runs] = {}
    key: tuple[str, str] | None = None
    group: list[Row] = []
    for node in nodes:
        model, case = node["model_id"], node["case_id"]
        if (cases and case not in cases) or (models and model not in models):
            continue
        if node["kind"] == "run":
            runs_of.setdefault(model, _Runs()).add(node)
        if model is None or case is None:
            continue
        if (model, case) != key:
            if key is not None:
                rows.append(_row(*key, group, results.get(key, [])))
            key, group = (model, case), []
        group.append(node)
    if key is not None:
        rows.append(_row(*key, group, results.get(key, [])))
    rows.sort(key=lambda r: (r.model_id, r.case_id))
    return rows, runs_of


def _in_groups(nodes: list[Row]) -> list[Row]:
    """`nodes` with those of one model and case together, each group in the order given."""
    return sorted(nodes, key=lambda n: (n["model_id"] is None, n["model_id"] or "", n["case_id"] is None,
                                        n["case_id"] or ""))


def _summaries(rows: Sequence[ReportRow], runs_of: Mapping[str, _Runs]) -> list[ModelSummary]:
    rows_of: dict[str, list[ReportRow]] = {}
    for r in rows:
        rows_of.setdefault(r.model_id, []).append(r)
    out = []
    for model in sorted(rows_of):
        mine, runs = rows_of[model], runs_of.get(model, _Runs())
        scores = [r.score for r in mine if r.score is not None]
        out.append(ModelSummary(
            model_id=model,
            cases=len(mine),
            scored=len(scores),
            mean_score=fmean(scores) if scores else None,
            mean_latency_s=_mean(runs.latencies),
            runs_executed=runs.executed,
            runs_reused=runs.reused,
            runs_failed=runs.failed,
            run_cost=CostSum.total(r.run_cost for r in mine),
            eval_cost=CostSum.total(r.eval_cost for r in mine),
            input_tokens=sum(r.input_tokens for r in mine),
            output_tokens=sum(r.output_tokens for r in mine),
            passed=sum(r.passed is True for r in mine),
            judged=sum(r.passed is not None for r in mine),
        ))
    return out


@dataclass(frozen=True)
class LoadedHead:
    """The campaign head a report shows: its id, the head typed, its document (nodes inline, as the row
    flatteners of query/ read it), and the signer of a head kept apart as untrusted (None: trusted)."""

    head_id: str
    head: Head
    doc: Mapping[str, Any]
    signer: str | None = None


def _head_ref(store: StoreReader, campaign_id: str) -> tuple[str, str | None]:
    """The campaign's head ref, or the head kept apart as untrusted when it has no trusted head (shown, and
    marked): (head id, signer or None)."""
    head_id = store.get_ref(f"campaigns/{campaign_id}")
    if head_id:
        return str(head_id), None
    from clawstore.store.untrusted import kept_apart_head

    apart = kept_apart_head(store, campaign_id)
    if apart is None:
        raise UsageError(f"no build recorded for campaign {campaign_id} (ref campaigns/{campaign_id} is missing; "
                         "run claw build)")
    return str(apart[0]), apart[1]


def _read_head(store: StoreReader, campaign_id: str, head_id: str, whole: bool = True) -> Mapping[str, Any]:
    """The head object `head_id`, its nodes inline (`whole`) or only its own fields (a parted head's
    node_count, not its parts)."""
    ref = f"campaigns/{campaign_id}"
    try:
        doc = read_head_doc(store, head_id) if whole else store.get_json(head_id)
    except MissingObjectError:
        raise UsageError(f"ref {ref} points at missing object {head_id} (run claw fsck)") from None
    if not isinstance(doc, Mapping):
        raise UsageError(f"ref {ref}: {head_id} is not a campaign head")
    return doc


def load_head(store: StoreReader, campaign_id: str) -> LoadedHead:
    """The campaign's head ref, or the head kept apart as untrusted when the campaign has no trusted head:
    shown, and marked."""
    head_id, signer = _head_ref(store, campaign_id)
    doc = _read_head(store, campaign_id, head_id)
    head = documents.read_head(doc, f"ref campaigns/{campaign_id}: campaign head {head_id}")  # (StoreError: the field)
    return LoadedHead(head_id, head, doc, signer)


# The columns the report reads of each table (the others are left in the files).
_NODE_COLUMNS = ("model_id", "case_id", "kind", "status", "action", "repetition", "judge_run_id", "judge_repetition",
                 "error_code", "error_message", "cost_usd", "cost_source", "latency_s", "input_tokens", "output_tokens")
COLUMNS = {"nodes": _NODE_COLUMNS,
           "results": ("model_id", "case_id", "passed", "pass_threshold", "final_score", *DIMENSIONS),
           "judgements": ("model_id", "case_id", "judge_run_id", "run_key", "overall_score", *DIMENSIONS)}


def _stamped(store: StoreReader, campaign_id: str, manifest: Path | None
             ) -> tuple[str, Head, str | None, dict[str, list[Row]]] | None:
    """The head and its results and judgements from the manifest alone, when its directory is stamped as
    this head's (heads.stamped_rows): the head's parts are not read. None: take the full path."""
    if manifest is None:
        return None
    head_id, signer = _head_ref(store, campaign_id)
    top = _read_head(store, campaign_id, head_id, whole=False)
    if not is_parted(top):
        return None
    tables = stamped_rows(manifest, head_id, top.get("node_count"), ("results", "judgements"), COLUMNS)
    if tables is None:
        return None
    where = f"ref campaigns/{campaign_id}: campaign head {head_id}"
    head = documents.read_head({**head_fields(top), "nodes": []}, where)
    return head_id, head, signer, tables


def build_report(store: StoreReader, campaign_id: str, cases: Sequence[str] = (),
                 models: Sequence[str] = (), manifest: Path | None = None) -> CampaignReport:
    """The campaign's last state (its head ref), one row per model × case, repetitions folded.
    `manifest`: the store's query manifest, whose rows of the head are read when it holds them (those
    `claw query` shows); else its records are read and flattened."""
    stamped = _stamped(store, campaign_id, manifest)
    if stamped is not None and manifest is not None:
        import duckdb

        head_id, head, signer, tables = stamped
        nodes = streamed_rows(manifest, head_id, "nodes", COLUMNS["nodes"], ("model_id", "case_id"))
        try:  # (the nodes streamed in groups: never all of them in memory)
            return _report(campaign_id, head_id, head, signer, nodes, tables, cases, models)
        except duckdb.Error:
            pass  # the directory went away meanwhile (another process's refresh): the full path
    loaded = load_head(store, campaign_id)
    found = (materialised_rows(manifest, loaded.head_id, loaded.doc, tuple(COLUMNS), COLUMNS)
             if manifest is not None else None)
    # Heads carry only a planning view of each record (`record_doc`): read the records themselves.
    tables = found if found is not None else stored_rows(store, loaded.doc)
    return _report(campaign_id, loaded.head_id, loaded.head, loaded.signer, _in_groups(tables["nodes"]), tables,
                   cases, models)


def _report(campaign_id: str, head_id: str, head: Head, signer: str | None, nodes: Iterable[Row],
            tables: Mapping[str, list[Row]], cases: Sequence[str], models: Sequence[str]) -> CampaignReport:
    """The report of a head from its nodes (one model × case after another) and its other tables."""
    results: dict[tuple[str, str], list[Row]] = {}
    for result in tables["results"]:
        results.setdefault((result["model_id"], result["case_id"]), []).append(result)
    rows, runs_of = _fold(nodes, results, cases, models)
    campaign = head.campaign
    return CampaignReport(
        campaign_id=campaign_id,
        suite_id=campaign.get("suite_id"),
        run_profile_id=campaign.get("run_profile_id"),
        evaluation_profile_id=campaign.get("evaluation_profile_id"),
        head_id=head_id,
        build_id=head.build_id,
        state=head.state,
        started_at=head.started_at,
        finished_at=head.finished_at,
        rows=rows,
        models=_summaries(rows, runs_of),
        untrusted_signer=signer,
        stats=model_stats(rows, pick(tables["results"], cases, models)),
        judge_reliability=judge_reliability(pick(tables["judgements"], cases, models), thresholds(tables["results"])),
    )
