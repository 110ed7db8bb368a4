"""Flatten one build log and the records its nodes name into manifest rows (pure: no I/O here).

The same rows feed the Parquet segments (`refresh_manifest`) and `claw report`, so both always agree.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from clawstore.query.schema import DIMENSIONS, PHYSICAL
from clawstore.store.headdoc import inline_or_none

Row = dict[str, Any]
RecordLoader = Callable[[str], Mapping[str, Any] | None]
ReadAhead = Callable[[list[str]], None]  # told which records are asked for next (to read them in bulk)
READ_AHEAD = 4096  # records announced at once: their bytes are held until each is asked for


def to_timestamp(value: Any) -> str | None:
    """ISO 8601 (with Z or an offset) -> naive UTC 'YYYY-MM-DD HH:MM:SS.ffffff' for a TIMESTAMP column."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.isoformat(sep=" ")


_BIGINT = (-(2**63), 2**63 - 1)


def _num(value: Any) -> float | None:
    """A DOUBLE cell: NaN, infinities and numbers beyond a double become null, never an indexing error."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    """A BIGINT cell: what a BIGINT cannot hold becomes null."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and _BIGINT[0] <= value <= _BIGINT[1]:
        return value
    return None


def _int32(value: Any) -> int | None:
    """An INTEGER cell (repetition indexes, counts)."""
    number = _int(value)
    return number if number is not None and -(2**31) <= number < 2**31 else None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _dict(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the slower ABC check
        return value
    return value if isinstance(value, Mapping) else {}


def build_context(log: Mapping[str, Any]) -> Row:
    campaign = _dict(log.get("campaign"))
    return {
        "build_id": _str(log.get("build_id")),
        "build_started_at": to_timestamp(log.get("started_at")),
        "campaign_id": _str(campaign.get("id")),
        "suite_id": _str(campaign.get("suite_id")),
        "run_profile_id": _str(campaign.get("run_profile_id")),
        "evaluation_profile_id": _str(campaign.get("evaluation_profile_id")),
    }


def _node_row(node: Mapping[str, Any], record: Mapping[str, Any] | None, ctx: Row) -> Row:
    """The columns every kind shares, from the build log's node entry and its record."""
    rec = record or {}
    # The build log's address wins: a record is shared by every campaign that reuses it, but the
    # address (model_id, case_id, repetition) is the one this campaign knows it by.
    summary = _dict(rec.get("summary"))
    address = {**summary, **_dict(rec.get("address")), **_dict(node.get("address"))}
    metrics = _dict(rec.get("metrics"))
    error = _dict(rec.get("error")) or _dict(node.get("error"))
    status = rec.get("status", node.get("status", "failed" if node.get("action") == "fail" else None))
    return {
        "kind": _str(node.get("kind") or rec.get("kind")),
        "key": _str(node.get("key") or rec.get("key")),
        "record_id": _str(node.get("record")),
        "action": _str(node.get("action")),
        "record_build_id": _str(rec.get("build_id")),
        "status": _str(status),
        "cacheable": rec.get("cacheable") if isinstance(rec.get("cacheable"), bool) else None,
        "model_id": _str(address.get("model_id")),
        "case_id": _str(address.get("case_id")),
        "repetition": _int32(address.get("repetition")),
        "judge_run_id": _str(address.get("judge_run_id")),
        "judge_repetition": _int32(address.get("judge_repetition")),
        "error_code": _str(error.get("code", summary.get("error_code"))),
        "error_message": _str(error.get("message", summary.get("error_message"))),
        "input_tokens": _int(metrics.get("input_tokens")),
        "output_tokens": _int(metrics.get("output_tokens")),
        "reasoning_tokens": _int(metrics.get("reasoning_tokens")),
        "cached_tokens": _int(metrics.get("cached_tokens")),
        "cost_usd": _num(metrics.get("cost_usd")),
        "latency_s": _num(metrics.get("latency_s")),
        "started_at": to_timestamp(rec.get("started_at")),
        "finished_at": to_timestamp(rec.get("finished_at")),
        **ctx,
    }


def _pick(table: str, row: Row) -> Row:
    return {c.name: row.get(c.name) for c in PHYSICAL[table]}


def _run_row(base: Row, rec: Mapping[str, Any]) -> Row:
    summary = _dict(rec.get("summary"))
    outputs = _dict(rec.get("outputs"))
    row = dict(base)
    row.update(
        input_document_id=_str(outputs.get("input_document", base["key"])),
        artifact_id=_str(outputs.get("artifact")),
        sandbox_id=_str(outputs.get("sandbox")),
        output_ids=sorted({str(v) for v in outputs.values() if isinstance(v, str)}),
        requested_model=_str(summary.get("requested_model")),
        runner_type=_str(summary.get("runner_type")),
        endpoint=_str(summary.get("endpoint")),
    )
    if row["error_code"] is None:
        row["error_code"] = _str(summary.get("error_code"))
    return _pick("runs", row)


def _check_rows(base: Row, rec: Mapping[str, Any]) -> list[Row]:
    summary = _dict(rec.get("summary"))
    rows = []
    for check in summary.get("checks") or []:
        check = _dict(check)
        dims = check.get("dimensions")
        row = dict(base)
        row.update(
            run_key=_str(summary.get("run_key")),
            check_id=_str(check.get("check_id")),
            kind=_str(check.get("kind")),
            outcome=_str(check.get("outcome")),
            message=_str(check.get("message")),
            dimensions=[str(d) for d in dims] if isinstance(dims, list) else None,
        )
        rows.append(_pick("checks", row))
    return rows


def _dimension_values(value: Any) -> Row:
    dims = _dict(value)
    out: Row = {}
    for name in DIMENSIONS:
        score = dims.get(name)
        if isinstance(score, Mapping):  # tolerate {score, evidence} objects
            score = score.get("score")
        out[name] = _num(score)
    return out


def _judge_row(base: Row, rec: Mapping[str, Any]) -> Row:
    summary = _dict(rec.get("summary"))
    row = dict(base)
    row.update(
        run_key=_str(summary.get("run_key")),
        judge_id=_str(summary.get("judge_id")),
        judge_model=_str(summary.get("judge_model")),
        overall_score=_num(summary.get("overall_score")),
        **_dimension_values(summary.get("dimensions")),
    )
    return _pick("judgements", row)


def _result_row(base: Row, rec: Mapping[str, Any], run: Row | None, eval_cost: float) -> Row:
    summary = _dict(rec.get("summary"))
    passed = summary.get("passed")
    run_cost = run.get("cost_usd") if run else None
    row = dict(base)
    row.update(
        run_key=_str(summary.get("run_key")),
        final_score=_num(summary.get("final_score")),
        **_dimension_values(summary.get("final_dimensions")),
        passed=passed if isinstance(passed, bool) else None,
        aggregation_method=_str(summary.get("aggregation_method")),
        pass_threshold=_num(summary.get("pass_threshold")),
        judge_iterations=_int32(summary.get("judge_iterations")),
        judge_successful=_int32(summary.get("judge_successful")),
        checks_total=_int32(summary.get("checks_total")),
        checks_passed=_int32(summary.get("checks_passed")),
        checks_failed=_int32(summary.get("checks_failed")),
        run_status=run.get("status") if run else None,
        latency_s=run.get("latency_s") if run else None,
        run_cost_usd=run_cost,
        eval_cost_usd=eval_cost,
        total_cost_usd=(run_cost or 0.0) + eval_cost,
    )
    return _pick("results", row)


def build_nodes(log: Mapping[str, Any], load_record: RecordLoader) -> list[Mapping[str, Any]]:
    """The nodes whose rows a build log (or a campaign head) gives: those it lists, then those the head
    it wrote says it reused."""
    return [_dict(node) for node in [*(log.get("nodes") or []), *_reused_nodes(log, load_record)]]


_NODE_FIELDS = ("kind", "key", "record", "action", "address", "error", "status")  # what _node_row reads


def same_rows(log: Mapping[str, Any], log_nodes: list[Mapping[str, Any]], head: Mapping[str, Any],
              head_nodes: list[Mapping[str, Any]]) -> bool:
    """Are the rows of `head` those of `log` (in another order)? They are when both have one context
    (the head a build wrote carries its id, campaign and start) and the same nodes as far as rows read
    them: a build's log lists what it executed and its head what it reused. Then a query that indexed
    the build does not read and flatten every record of the campaign a second time for its head."""
    if build_context(head) != build_context(log) or len(head_nodes) != len(log_nodes):
        return False

    def signatures(nodes: list[Mapping[str, Any]]) -> Counter[str]:
        return Counter(json.dumps([node.get(name) for name in _NODE_FIELDS], sort_keys=True, default=repr)
                       for node in nodes)

    return signatures(log_nodes) == signatures(head_nodes)


def rows_for_build(log: Mapping[str, Any], load_record: RecordLoader, read_ahead: ReadAhead | None = None,
                   nodes: list[Mapping[str, Any]] | None = None) -> dict[str, list[Row]]:
    """All manifest rows for one build log: {physical table: rows}. `load_record(oid)` reads a record;
    `read_ahead`, if given, hears of the next READ_AHEAD records before they are asked for; `nodes`:
    the log's `build_nodes`, if the caller has them."""
    ctx = build_context(log)
    tables: dict[str, list[Row]] = {name: [] for name in PHYSICAL}
    pending: list[tuple[Row, Mapping[str, Any]]] = []
    runs_by_key: dict[str, Row] = {}
    eval_cost: dict[str, float] = {}
    nodes = build_nodes(log, load_record) if nodes is None else nodes
    for at, node in enumerate(nodes):
        if read_ahead is not None and at % READ_AHEAD == 0:
            read_ahead([oid for n in nodes[at:at + READ_AHEAD] if isinstance(oid := n.get("record"), str) and oid])
        oid = node.get("record")
        record = load_record(oid) if isinstance(oid, str) and oid else None
        base = _node_row(node, record, ctx)
        tables["nodes"].append(_pick("nodes", base))
        kind = base["kind"]
        if record is None:
            continue
        run_key = _str(_dict(record.get("summary")).get("run_key"))
        if kind in ("checks", "judge", "result") and run_key:
            eval_cost[run_key] = eval_cost.get(run_key, 0.0) + (base["cost_usd"] or 0.0)
        if kind == "run":
            row = _run_row(base, record)
            tables["runs"].append(row)
            if row["key"]:
                runs_by_key[row["key"]] = row
        elif kind == "checks":
            tables["checks"].extend(_check_rows(base, record))
        elif kind == "judge":
            tables["judgements"].append(_judge_row(base, record))
        elif kind == "result":
            pending.append((base, record))
    # Results come last: their costs need every run and judge of the build.
    for base, record in pending:
        run_key = _str(_dict(record.get("summary")).get("run_key")) or ""
        tables["results"].append(_result_row(base, record, runs_by_key.get(run_key), eval_cost.get(run_key, 0.0)))
    tables["builds"].append(_build_row(log, ctx, tables["nodes"]))
    return tables


def _reused_nodes(log: Mapping[str, Any], load_record: RecordLoader) -> list[Any]:
    """What a format-2 build reused, from the head it wrote (a no-op build wrote none: nothing to add).

    Its log lists only what it executed, failed or skipped; the head it wrote carries every node it
    planned with this build's action (within its --case/--model filter, if any)."""
    head_id = log.get("head")
    if log.get("format") != 2 or not log.get("head_written") or not isinstance(head_id, str):
        return []
    head = inline_or_none(load_record(head_id), load_record) or {}
    flt = _dict(log.get("filter"))
    cases, models = set(flt.get("cases") or ()), set(flt.get("models") or ())
    found = []
    for node in head.get("nodes") or []:
        node = _dict(node)
        if node.get("action") != "reuse":
            continue
        address = _dict(node.get("address"))
        if (cases and address.get("case_id") not in cases) or (models and address.get("model_id") not in models):
            continue
        found.append({name: node.get(name) for name in ("kind", "key", "record", "action", "address")})
    return found


def _build_row(log: Mapping[str, Any], ctx: Row, nodes: list[Row]) -> Row:
    counts = _dict(log.get("counts"))
    metrics = _dict(log.get("metrics"))
    return {
        "build_id": ctx["build_id"],
        "started_at": ctx["build_started_at"],
        "finished_at": to_timestamp(log.get("finished_at")),
        "state": _str(log.get("state")),
        "campaign_id": ctx["campaign_id"],
        "suite_id": ctx["suite_id"],
        "run_profile_id": ctx["run_profile_id"],
        "evaluation_profile_id": ctx["evaluation_profile_id"],
        "nodes": sum(_int(v) or 0 for v in counts.values()) if log.get("format") == 2 else len(nodes),
        "executed": _int32(counts.get("executed")),
        "reused": _int32(counts.get("reused")),
        "failed": _int32(counts.get("failed")),
        "skipped": _int32(counts.get("skipped")),
        "input_tokens": _int(metrics.get("input_tokens")),
        "output_tokens": _int(metrics.get("output_tokens")),
        "reasoning_tokens": _int(metrics.get("reasoning_tokens")),
        "cached_tokens": _int(metrics.get("cached_tokens")),
        "cost_usd": _num(metrics.get("cost_usd")),
        "results_cost_usd": sum(n["cost_usd"] or 0.0 for n in nodes),
    }
