"""Collect one campaign's report from the store: its head ref, the records it names, nothing else.

No config is read and no provider is called, so a campaign whose configs changed since still reports
its last build. Rows come from the same flattening the manifest uses (clawstore.query.rows), or from
the manifest itself once the head is materialised there (the same rows, read back).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from math import fsum
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any, Protocol

from clawstore.errors import MissingObjectError, UsageError
from clawstore.query.heads import materialised_rows, stamped_rows, stored_rows, streamed_rows
from clawstore.query.rows import Row
from clawstore.query.schema import DIMENSIONS
from clawstore.report.coverage import Coverage, coverage_of
from clawstore.report.stats import (
    JudgeReliability,
    ModelStats,
    judge_reliability,
    pick,
    stats_json,
    thresholds,
)
from clawstore.stats.intervals import mean_interval, wilson
from clawstore.stats.repetitions import VerdictTally
from clawstore.store import documents
from clawstore.store.documents import Head, stopped_text
from clawstore.store.headdoc import head_fields, is_parted, read_head_doc
from clawstore.values.canonical import field_values
from clawstore.values.costs import PAID_KINDS, PRICED, REPORTED, SOURCES, UNKNOWN, CostFold, CostSum, known_cost

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
    input_tokens: int = 0  # of the runs whose tokens are known, and the known part of the others' (judges': eval_cost)
    output_tokens: int = 0
    tokens_unknown: int = 0  # runs whose tokens are unknown (usage not reported, or not believed): the sums are `≥`
    dimensions: dict[str, float | None] = field(default_factory=dict)  # mean final score per dimension
    pass_threshold: float | None = None  # the verdict's threshold; None: no pass/fail

    @property
    def total_cost(self) -> CostSum:
        return self.run_cost + self.eval_cost

    def to_json(self) -> dict[str, Any]:
        return token_json(cost_json(field_values(self), self.run_cost, self.eval_cost))


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
    tokens_unknown: int = 0
    passed: int = 0  # rows with a pass verdict that passed
    judged: int = 0  # rows with a pass verdict

    @property
    def total_cost(self) -> CostSum:
        return self.run_cost + self.eval_cost

    def to_json(self) -> dict[str, Any]:
        return token_json(cost_json(field_values(self), self.run_cost, self.eval_cost))


class RowSink(Protocol):
    """Where a report's rows go when they are not held (text.JsonRows: their JSON text, spilled to a file)."""

    def add(self, row: ReportRow) -> None: ...

    def __len__(self) -> int: ...


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
    rows: list[ReportRow]  # (empty when they went to `spilled`)
    models: list[ModelSummary]
    untrusted_signer: str | None = None  # set when the head was kept apart (imported with --untrusted)
    stats: dict[str, ModelStats] = field(default_factory=dict)  # per model: intervals, pass@k
    judge_reliability: list[JudgeReliability] = field(default_factory=list)
    run_cost: CostSum = field(default_factory=CostSum)  # of every row (compensated: CostFold)
    eval_cost: CostSum = field(default_factory=CostSum)
    spilled: RowSink | None = None  # the rows, when build_report was given a sink for them
    # Every model and case of the head, filters or not: `claw report` names each filter value matching none of them.
    head_models: frozenset[str] = frozenset()
    head_cases: frozenset[str] = frozenset()
    # The campaign's builds killed before they finished and not yet told of (spend/killed.py: KilledBuild.to_json):
    # money spent that the head's totals do not hold; `claw report` names the same on stderr.
    killed_builds: list[dict[str, Any]] = field(default_factory=list)
    # The head's build was stopped before its end: `{"by": …, "nodes_not_started": N}` (read from the build log the
    # head carries: documents.read_stopped; `by`: its run profile's execution_policy, --max-cost, a 402); those nodes
    # are in no row (a run not started: its row is the one before it, if any).
    stopped: dict[str, Any] | None = None
    # How many of the results its campaign expects the head holds (report/coverage.py); None: the head does not say
    # (written by a claw before session 80).
    coverage: Coverage | None = None

    @property
    def coverage_lines(self) -> list[str]:
        """The lines under `Head:` (report and page): the results never built, the models' cases differing."""
        if self.coverage is None:
            return []
        return [line for line in (self.coverage.line(), self.coverage.differ_line()) if line]

    @property
    def state_text(self) -> str | None:
        """The head's state as the report and the page say it: a stop names what stopped it and the nodes not
        started."""
        if self.stopped is None:
            return self.state
        return stopped_text(self.stopped)

    @property
    def untrusted_line(self) -> str | None:
        if self.untrusted_signer is None:
            return None
        return (f"UNTRUSTED: kept apart, signed by {self.untrusted_signer}; no build reuses these results "
                f"until you claw trust add the signer")

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
                     "started_at": self.started_at, "finished_at": self.finished_at, "stopped": self.stopped},
            "trusted": self.untrusted_signer is None,
            "signer": self.untrusted_signer,
            "rows": [r.to_json() for r in self.rows] if rows else [],
            "models": [{**m.to_json(), **stats_json(self.stats, m.model_id)} for m in self.models],
            "judge_reliability": [j.to_json() for j in self.judge_reliability],
            "totals": cost_json({}, self.run_cost, self.eval_cost),
            "killed_builds": self.killed_builds,
            "coverage": None if self.coverage is None else self.coverage.to_json(),
        }


def cost_json(fields: dict[str, Any], run: CostSum, evaluation: CostSum) -> dict[str, Any]:
    """`fields` with the costs as JSON: each null when a part of it is unknown (never 0), the known part
    of the total, and how many runs and judgements each cost source priced."""
    total = run + evaluation
    out = {name: value for name, value in fields.items() if name not in ("run_cost", "eval_cost")}
    out.update(run_cost_usd=run.shown, eval_cost_usd=evaluation.shown, total_cost_usd=total.shown,
               known_cost_usd=total.shown_known, cost_sources=total.sources())  # (shown: no float noise)
    return out


def token_json(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with its runs' token sums null when a part is unknown (never 0s), the known part beside them, as the
    costs are."""
    if fields.get("tokens_unknown"):
        fields.update(known_input_tokens=fields["input_tokens"], known_output_tokens=fields["output_tokens"],
                      input_tokens=None, output_tokens=None)
    return fields


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
    detail = ": ".join(str(p) for p in (node["error_code"], node["error_message"]) if p)
    return f"{_where(node)}: {node['status'] or node['action']}" + (f" ({detail})" if detail else "")


def _where(node: Row) -> str:
    """"run rep 0", "judge rep 0 judge main#1": which node of a row a problem is of."""
    where = f"rep {node['repetition']}" if node["repetition"] is not None else ""
    if node["kind"] == "judge":
        where += f" judge {node['judge_run_id']}#{node['judge_repetition']}"
    return f"{node['kind']} {where.strip()}"


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
            self.known += known_cost(node["cost_known_usd"]) or 0.0  # (what it spent at least: `≥` that)
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
    statuses = input_tokens = output_tokens = tokens_unknown = 0
    for node in nodes:
        kind, status = node["kind"], node["status"]
        if (problem := _problem(node)) is not None:
            problems.append(problem)
        if warning := node.get("prompt_warning"):  # (a heuristic: its status stands; docs/runners.md)
            problems.append(f"{_where(node)}: warning: {warning}")
        if kind == "run":
            run_cost.add(node)
            if action := node["action"]:
                run_actions.add(action)
            repetitions.add(node["repetition"])
            latencies.append(node["latency_s"])
            if node["cost_source"] is None:  # (no record: never sent, nothing spent)
                pass
            elif node["input_tokens"] is None or node["output_tokens"] is None:
                tokens_unknown += 1
                input_tokens += node["input_tokens_known"] or 0  # (what it spent at least: `≥` that)
                output_tokens += node["output_tokens_known"] or 0
            else:
                input_tokens += node["input_tokens"]
                output_tokens += node["output_tokens"]
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
        tokens_unknown=tokens_unknown,
        dimensions=_means(results, DIMENSIONS),
        pass_threshold=next((r["pass_threshold"] for r in results if r["pass_threshold"] is not None), None),
    )


class _ModelFold:
    """What a model's summary and statistics read of its rows and run nodes, folded as they come: counts, sums, and
    the values its means and intervals are taken of as doubles (8 bytes each: about 70 bytes a row, not the row)."""

    def __init__(self) -> None:
        self.cases = self.input_tokens = self.output_tokens = self.tokens_unknown = self.passed = self.judged = 0
        self.scores = array("d")
        self.dimensions = {d: array("d") for d in DIMENSIONS}
        self.run_cost, self.eval_cost = CostFold(), CostFold()
        self.verdicts = VerdictTally()  # per case, its results' verdicts (pass@k)
        self.latencies = array("d")  # of its run nodes, those known
        self.executed = self.reused = self.failed = 0
        self.case_ids = hashlib.blake2b(digest_size=16)  # of its rows' cases, in order: the same, the same cases

    def add_run(self, node: Row) -> None:
        if (latency := node["latency_s"]) is not None:
            self.latencies.append(latency)
        self.executed += node["action"] == "exec"
        self.reused += node["action"] == "reuse"
        self.failed += node["action"] == "fail" or node["status"] not in _OK

    def add_row(self, row: ReportRow, results: list[Row]) -> None:
        self.cases += 1
        self.case_ids.update(row.case_id.encode("utf-8", "surrogatepass") + b"\0")
        if row.score is not None:
            self.scores.append(row.score)
        for name, values in self.dimensions.items():
            if (value := row.dimensions.get(name)) is not None:
                values.append(value)
        self.run_cost.add(row.run_cost)
        self.eval_cost.add(row.eval_cost)
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        self.tokens_unknown += row.tokens_unknown
        self.passed += row.passed is True
        self.judged += row.passed is not None
        if verdicts := [r["passed"] for r in results if r["passed"] is not None]:
            self.verdicts.add(verdicts)

    def summary(self, model: str) -> ModelSummary:
        return ModelSummary(
            model_id=model, cases=self.cases, scored=len(self.scores),
            mean_score=fmean(self.scores) if self.scores else None,
            mean_latency_s=fsum(self.latencies) / len(self.latencies) if self.latencies else None,
            runs_executed=self.executed, runs_reused=self.reused, runs_failed=self.failed,
            run_cost=self.run_cost.sum(), eval_cost=self.eval_cost.sum(), input_tokens=self.input_tokens,
            output_tokens=self.output_tokens, tokens_unknown=self.tokens_unknown, passed=self.passed,
            judged=self.judged)

    def stats(self) -> ModelStats:
        """Its intervals; a case counts once, whatever its run and judge repetitions."""
        dims = {d: mean_interval(list(values)) for d, values in self.dimensions.items()}
        return ModelStats(score=mean_interval(list(self.scores)), pass_rate=wilson(self.passed, self.judged),
                          dimensions={d: i for d, i in dims.items() if i is not None}, pass_k=self.verdicts.pass_k())


class _Unordered(Exception):
    """Rows streamed out of their model × case order (never seen: DuckDB orders strings as Python does): start over
    on the full path."""


@dataclass
class _Folded:
    models: dict[str, _ModelFold] = field(default_factory=dict)
    run_cost: CostFold = field(default_factory=CostFold)  # of every row, summed at the end (math.fsum)
    eval_cost: CostFold = field(default_factory=CostFold)
    head_models: set[str] = field(default_factory=set)  # (before the filters)
    head_cases: set[str] = field(default_factory=set)

    def model(self, model: str) -> _ModelFold:
        found = self.models.get(model)
        if found is None:
            found = self.models[model] = _ModelFold()
        return found

    def add(self, row: ReportRow, results: list[Row], rows_to: Callable[[ReportRow], None]) -> None:
        self.model(row.model_id).add_row(row, results)
        self.run_cost.add(row.run_cost)
        self.eval_cost.add(row.eval_cost)
        rows_to(row)


def _fold(nodes: Iterable[Row], results_of: Callable[[tuple[str, str]], list[Row]], cases: Sequence[str],
          models: Sequence[str], rows_to: Callable[[ReportRow], None]) -> _Folded:
    """One row per model × case of `nodes` (given one group after another in model × case order: a group's nodes
    held, not all of them), handed to `rows_to` in that order and folded into each model's summary."""
    folded = _Folded()
    key: tuple[str, str] | None = None
    group: list[Row] = []
    for node in nodes:
        model, case = node["model_id"], node["case_id"]
        folded.head_models.add(model)
        folded.head_cases.add(case)
        if (cases and case not in cases) or (models and model not in models):
            continue
        if node["kind"] == "run":
            folded.model(model).add_run(node)
        if model is None or case is None:
            continue
        if (model, case) != key:
            if key is not None:
                if (model, case) < key:
                    raise _Unordered(f"{model}/{case} after {key[0]}/{key[1]}")
                results = results_of(key)
                folded.add(_row(*key, group, results), results, rows_to)
            key, group = (model, case), []
        group.append(node)
    if key is not None:
        results = results_of(key)
        folded.add(_row(*key, group, results), results, rows_to)
    return folded


def _in_groups(nodes: list[Row]) -> list[Row]:
    """`nodes` with those of one model and case together, each group in the order given."""
    return sorted(nodes, key=lambda n: (n["model_id"] is None, n["model_id"] or "", n["case_id"] is None,
                                        n["case_id"] or ""))


class _ResultsInOrder:
    """The results of a stream ordered by model and case, handed out a model × case at a time in the same order (none
    held but the group asked for)."""

    def __init__(self, rows: Iterator[Row]) -> None:
        self._rows = rows
        self._next = next(rows, None)

    def __call__(self, key: tuple[str, str]) -> list[Row]:
        out = []
        while (row := self._next) is not None:
            model, case = row["model_id"], row["case_id"]
            if model is None:
                break  # (the rest have none either: nulls come last)
            if case is None:
                if model >= key[0]:
                    break  # (after every case of its model)
            elif (model, case) > key:
                break
            elif (model, case) == key:
                out.append(row)
            self._next = next(self._rows, None)
        return out


@dataclass(frozen=True)
class LoadedHead:
    """The campaign head a report shows: its id, the head typed, its document (nodes inline, as the row
    flatteners of query/ read it), and the signer of a head kept apart as untrusted (None: trusted)."""

    head_id: str
    head: Head
    doc: Mapping[str, Any]
    signer: str | None = None


def _head_ref(store: StoreReader, campaign_id: str, read: str | None = None) -> tuple[str, str | None]:
    """The campaign's head ref, or the head kept apart as untrusted when it has no trusted head (shown, and
    marked): (head id, signer or None). `read`: the ref's value as the caller read it (under a lease naming it)."""
    head_id = read or store.get_ref(f"campaigns/{campaign_id}")
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


def load_head(store: StoreReader, campaign_id: str, read: str | None = None) -> LoadedHead:
    """The campaign's head ref, or the head kept apart as untrusted when the campaign has no trusted head:
    shown, and marked. `read`: the ref's value as the caller read it."""
    head_id, signer = _head_ref(store, campaign_id, read)
    doc = _read_head(store, campaign_id, head_id)
    head = documents.read_head(doc, f"ref campaigns/{campaign_id}: campaign head {head_id}")  # (StoreError: the field)
    return LoadedHead(head_id, head, doc, signer)


# The columns the report reads of each table (the others are left in the files).
_NODE_COLUMNS = ("model_id", "case_id", "kind", "status", "action", "repetition", "judge_run_id", "judge_repetition",
                 "error_code", "error_message", "prompt_warning", "cost_usd", "cost_source", "cost_known_usd",
                 "latency_s", "input_tokens", "output_tokens", "input_tokens_known", "output_tokens_known")
COLUMNS = {"nodes": _NODE_COLUMNS,
           "results": ("model_id", "case_id", "passed", "pass_threshold", "final_score", *DIMENSIONS),
           "judgements": ("model_id", "case_id", "judge_run_id", "run_key", "overall_score", *DIMENSIONS)}


def _stamped(store: StoreReader, campaign_id: str, manifest: Path | None, read: str | None = None
             ) -> tuple[str, Head, str | None, int] | None:
    """The head (and its node count) when the manifest's directory of it is stamped as this head's
    (heads.stamped_rows): its rows are read from there, the head's parts are not. None: take the full path."""
    if manifest is None:
        return None
    head_id, signer = _head_ref(store, campaign_id, read)
    top = _read_head(store, campaign_id, head_id, whole=False)
    if not is_parted(top):
        return None
    node_count = top.get("node_count")
    if stamped_rows(manifest, head_id, node_count, (), COLUMNS) is None:
        return None
    where = f"ref campaigns/{campaign_id}: campaign head {head_id}"
    head = documents.read_head({**head_fields(top), "nodes": []}, where)
    return head_id, head, signer, node_count


def build_report(store: StoreReader, campaign_id: str, cases: Sequence[str] = (),
                 models: Sequence[str] = (), manifest: Path | None = None,
                 sink: Callable[[], RowSink] | None = None, read: str | None = None) -> CampaignReport:
    """The campaign's last state (its head ref), one row per model × case, repetitions folded. `read`: the ref's value
    as the caller read it (`claw report` holds a lease naming it: Store.reading_ref), else the ref is read here.
    `manifest`: the store's query manifest, whose rows of the head are read when it holds them (those
    `claw query` shows); else its records are read and flattened. `sink`: where the rows go instead of the
    report's `rows` (made anew if the report starts over), the summaries folded as they pass."""
    stamped = _stamped(store, campaign_id, manifest, read)
    if stamped is not None and manifest is not None:
        import duckdb

        head_id, head, signer, node_count = stamped
        nodes = streamed_rows(manifest, head_id, "nodes", COLUMNS["nodes"], ("model_id", "case_id"))
        try:  # (the nodes and results streamed in groups: never all of them in memory)
            results = _ResultsInOrder(streamed_rows(manifest, head_id, "results", COLUMNS["results"],
                                                    ("model_id", "case_id")))
            return _report(campaign_id, head_id, head, signer, nodes, results,
                           lambda: _streamed_reliability(manifest, head_id, node_count, cases, models), cases, models,
                           sink)
        except (duckdb.Error, _Unordered):
            pass  # the directory went away meanwhile (another process's refresh): the full path
    loaded = load_head(store, campaign_id, read)
    found = (materialised_rows(manifest, loaded.head_id, loaded.doc, tuple(COLUMNS), COLUMNS)
             if manifest is not None else None)
    # Heads carry only a planning view of each record (`record_doc`): read the records themselves.
    tables = found if found is not None else stored_rows(store, loaded.doc)
    grouped: dict[tuple[str, str], list[Row]] = {}
    for result in tables["results"]:
        grouped.setdefault((result["model_id"], result["case_id"]), []).append(result)
    return _report(campaign_id, loaded.head_id, loaded.head, loaded.signer, _in_groups(tables["nodes"]),
                   lambda key: grouped.get(key, []), lambda: _reliability(tables, cases, models), cases, models, sink)


def model_stats(rows: Iterable[ReportRow], results: Iterable[Row]) -> dict[str, ModelStats]:
    """Each model's intervals from rows held (build_report folds them as the rows pass)."""
    of: dict[tuple[str, str], list[Row]] = {}
    for result in results:
        of.setdefault((result["model_id"], result["case_id"]), []).append(result)
    folded = _Folded()
    for row in rows:
        folded.add(row, of.get((row.model_id, row.case_id), []), lambda _: None)
    return {model: fold.stats() for model, fold in sorted(folded.models.items())}


def _reliability(tables: Mapping[str, list[Row]], cases: Sequence[str], models: Sequence[str]
                 ) -> list[JudgeReliability]:
    return judge_reliability(pick(tables["judgements"], cases, models), thresholds(tables["results"]))


def _streamed_reliability(manifest: Path, head_id: str, node_count: int, cases: Sequence[str],
                          models: Sequence[str]) -> list[JudgeReliability]:
    """judge_reliability of the head's judgements: none unless a judge judged some run twice or more, which one pass
    over them (ordered by judge and run, one at a time) tells; only then are they read whole."""
    judged = streamed_rows(manifest, head_id, "judgements", ("judge_run_id", "run_key"), ("judge_run_id", "run_key"))
    previous: tuple[Any, Any] | None = None
    for judgement in judged:
        at = (judgement["judge_run_id"], judgement["run_key"])
        if at == previous:
            break
        previous = at
    else:
        return []
    tables = stamped_rows(manifest, head_id, node_count, ("results", "judgements"), COLUMNS)
    if tables is None:
        raise _Unordered("the head's rows went away")  # (the full path reads them again)
    return _reliability(tables, cases, models)


def _report(campaign_id: str, head_id: str, head: Head, signer: str | None, nodes: Iterable[Row],
            results_of: Callable[[tuple[str, str]], list[Row]], reliability: Callable[[], list[JudgeReliability]],
            cases: Sequence[str], models: Sequence[str], sink: Callable[[], RowSink] | None) -> CampaignReport:
    """The report of a head from its nodes (one model × case after another) and its results (by model × case)."""
    rows: list[ReportRow] = []
    spilled = sink() if sink is not None else None
    folded = _fold(nodes, results_of, cases, models, rows.append if spilled is None else spilled.add)
    campaign = head.campaign
    held = sorted((model, fold) for model, fold in folded.models.items() if fold.cases)
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
        stopped=head.stopped,
        rows=rows,
        models=[fold.summary(model) for model, fold in held],
        untrusted_signer=signer,
        stats={model: fold.stats() for model, fold in held},
        judge_reliability=reliability(),
        run_cost=folded.run_cost.sum(),
        eval_cost=folded.eval_cost.sum(),
        spilled=spilled,
        head_models=frozenset(folded.head_models - {None}),
        head_cases=frozenset(folded.head_cases - {None}),
        coverage=coverage_of(head.expected, {model: fold.cases for model, fold in held},
                             {model: fold.case_ids.digest() for model, fold in held}, cases, models),
    )
