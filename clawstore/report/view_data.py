"""What `claw view` shows, collected from the store alone: the report's numbers plus each run's detail.

The summary (leaderboard, matrix, filters) is small and parsed when the page opens; each run's detail
(conversation, checks, judge reasoning, aggregation) is one line of `details`, parsed only when the
run's page is opened, so a 10,000-run campaign opens without reading 10,000 transcripts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError
from clawstore.report.data import CampaignReport, build_report
from clawstore.report.stats import paired_vs_baseline, stats_json
from clawstore.store.documents import HeadNode, Metrics
from clawstore.store.headdoc import read_head
from clawstore.values.costs import CostSum, source_of

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader

MAX_TEXT = 20_000  # characters of one message or tool output kept in the page; the store keeps all


class _CachedStore:
    """Reads each record once: the report and the run details look at the same records. What only a
    run's page shows (its artifact, the checks' and judgements' bodies) is read once anyway, and not
    kept: held for every run, they tripled the memory of a 10,000-run page."""

    def __init__(self, store: StoreReader):
        self._store = store
        self._json: dict[str, Any] = {}

    def get_ref(self, name: str) -> Any:
        return self._store.get_ref(name)

    def list_refs(self, prefix: str = "") -> dict[str, str]:
        return getattr(self._store, "list_refs", lambda _prefix: {})(prefix)

    def has(self, oid: str) -> bool:
        return bool(self._store.has(oid))  # type: ignore[attr-defined]

    def get_json(self, oid: str) -> Any:
        if oid not in self._json:
            self._json[oid] = self._store.get_json(oid)
        return self._json[oid]

    def maybe_json(self, oid: Any) -> Any:
        if not isinstance(oid, str) or not oid:
            return None
        try:
            return self._json[oid] if oid in self._json else self._store.get_json(oid)
        except (MissingObjectError, ValueError):
            return None  # gc'd or not JSON: the page says "not stored"


@dataclass
class ViewData:
    summary: dict[str, Any]
    details: list[dict[str, Any]] = field(default_factory=list)


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


def _judgement(record: Mapping[str, Any], store: _CachedStore) -> dict[str, Any]:
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


def _checks(record: Mapping[str, Any] | None, store: _CachedStore) -> list[dict[str, Any]]:
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


def _run_detail(nodes: Sequence[tuple[HeadNode, Mapping[str, Any] | None]], store: _CachedStore,
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
        "tokens": {"input": spent.input_tokens, "output": spent.output_tokens, "reasoning": spent.reasoning_tokens},
        "latency_s": spent.latency_s, "run_cost_usd": CostSum.of_metrics(metrics).usd if run else None,
        "run_cost_source": source_of(metrics) if run else None, "eval_cost_usd": eval_cost.usd,
        "eval_cost_sources": eval_cost.sources(), "conversation": conversation(artifact),
        "artifact_stored": artifact is not None, "checks": _checks(checks_record, store), "judgements": judges,
        "result": _result(result_record),
    }


def _node_cost(record: Mapping[str, Any]) -> dict[str, Any]:
    metrics = record.get("metrics") or {}
    return {"cost_usd": CostSum.of_metrics(metrics).usd, "cost_source": source_of(metrics)}


def _costs(run: CostSum, evaluation: CostSum) -> dict[str, Any]:
    """Costs for the page: numbers (null: a part unknown) and their text ("≥0.00120 (2 of 5 unknown)")."""
    total = run + evaluation
    return {"run_cost_usd": run.usd, "eval_cost_usd": evaluation.usd, "total_cost_usd": total.usd,
            "known_cost_usd": total.known_usd, "run_cost_text": run.text(5), "eval_cost_text": evaluation.text(5),
            "total_cost_text": total.text(5)}


def _pass_rate(report: CampaignReport, model: str) -> tuple[int, int]:
    verdicts = [r.passed for r in report.rows if r.model_id == model and r.passed is not None]
    return sum(verdicts), len(verdicts)


def _campaign_summary(report: CampaignReport) -> dict[str, Any]:
    return {"id": report.campaign_id, "suite_id": report.suite_id, "run_profile_id": report.run_profile_id,
            "evaluation_profile_id": report.evaluation_profile_id, "build_id": report.build_id,
            "state": report.state, "finished_at": report.finished_at,
            **_costs(report.run_cost, report.eval_cost), "untrusted": report.untrusted_line}


def collect(store: StoreReader, campaign_ids: Sequence[str], tags: Mapping[str, Sequence[str]] | None = None
            ) -> ViewData:
    """The page's data for one campaign, or a comparison of several (the first is the baseline)."""
    cached = _CachedStore(store)
    summary: dict[str, Any] = {"campaigns": [], "models": [], "cases": [], "rows": [], "tags": {}}
    details: list[dict[str, Any]] = []
    cases: dict[str, int] = {}
    reports = []
    for index, campaign_id in enumerate(campaign_ids):
        report = build_report(cached, campaign_id)
        reports.append(report)
        summary["campaigns"].append(_campaign_summary(report))
        for m in report.models:
            passed, verdicts = _pass_rate(report, m.model_id)
            summary["models"].append({
                "campaign": index, "model_id": m.model_id, "cases": m.cases, "scored": m.scored,
                "mean_score": m.mean_score, "passed": passed, "verdicts": verdicts,
                "pass_rate": passed / verdicts if verdicts else None, "mean_latency_s": m.mean_latency_s,
                "runs_executed": m.runs_executed, "runs_reused": m.runs_reused, "runs_failed": m.runs_failed,
                **_costs(m.run_cost, m.eval_cost), **stats_json(report.stats, m.model_id)})
        grouped = _group_nodes(cached, report.head_id)
        for row in report.rows:
            case_index = cases.setdefault(row.case_id, len(cases))
            run_indices = []
            for repetition in sorted(grouped.get((row.model_id, row.case_id), {})):
                run_indices.append(len(details))
                details.append(_run_detail(grouped[(row.model_id, row.case_id)][repetition], cached, index))
            summary["rows"].append({
                "campaign": index, "model_id": row.model_id, "case": case_index, "score": row.score,
                "passed": row.passed, "status": row.status, "latency_s": row.latency_s,
                "cost_usd": row.total_cost.usd, "cost_text": row.total_cost.text(5), "run_action": row.run_action,
                "eval_action": row.eval_action,
                "problems": row.problems, "runs": run_indices})
    summary["judge_reliability"] = [{"campaign": i, **j.to_json()} for i, r in enumerate(reports)
                                    for j in r.judge_reliability]
    summary["paired"] = paired_vs_baseline(reports)
    summary["cases"] = list(cases)
    summary["tags"] = {case: list(tags.get(case, ())) for case in cases} if tags else {}
    return ViewData(summary, details)


def _group_nodes(store: _CachedStore, head_id: str
                 ) -> dict[tuple[str, str], dict[int, list[tuple[HeadNode, Mapping[str, Any] | None]]]]:
    """The head's nodes with their records, by (model, case) then run repetition."""
    grouped: dict[tuple[str, str], dict[int, list[tuple[HeadNode, Mapping[str, Any] | None]]]] = {}
    for node in read_head(store, head_id).nodes:
        model, case, repetition = (node.address.get(name) for name in ("model_id", "case_id", "repetition"))
        if model is None or case is None:
            continue
        record = store.maybe_json(node.record)
        grouped.setdefault((model, case), {}).setdefault(int(repetition or 0), []).append((node, record))
    return grouped
