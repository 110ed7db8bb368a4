"""Flatten one build log and the records its nodes name into manifest rows (pure: no I/O here).

The same rows feed the Parquet segments (`refresh_manifest`) and `claw report`, so both always agree.
A node whose rows an earlier segment or head already holds (same record, same `node_sig`) need not be
read and flattened again: `flatten` leaves it to the writer to copy them (query/copied.py).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import blake3

from clawstore.query.packed import Facts, FactTable, TakenNodes
from clawstore.query.schema import (
    CHECK_FIELDS,
    DIMENSIONS,
    JUDGE_SUMMARY,
    PHYSICAL,
    RESULT_SUMMARY,
    RUN_SUMMARY,
    Column,
)
from clawstore.store.documents import COUNTERS, KNOWN_TOKENS, TOKEN_METRICS
from clawstore.store.headdoc import inline_or_none
from clawstore.values.costs import PAID_KINDS, UNKNOWN, CostSum, known_cost, source_of
from clawstore.values.tokens import TOKENS_UNKNOWN, UNKNOWN_WHEN_PART_IS
from clawstore.values.urls import shown_text, shown_url

Row = dict[str, Any]
RecordLoader = Callable[[str], Mapping[str, Any] | None]
ReadAhead = Callable[[list[str]], None]  # told which records are asked for next (to read them in bulk)
# Records announced at once: their bytes are held until each is asked for, and the store maps the pages around each
# (a window of 4,096 records scattered over an imported 680 MB pack touched 280 MB more than one of 1,024).
READ_AHEAD = 1024


def _code_tag() -> bytes:
    """A row copied from an earlier file must be the row flattening gives now: the signature of a node
    covers this module and the schema, so a claw whose flattening differs copies nothing an older one
    wrote. (Installed without its sources, claw has only its version to go by.)"""
    try:
        code = b"".join(Path(__file__).with_name(name).read_bytes() for name in ("rows.py", "schema.py"))
    except OSError:
        from clawstore import __version__

        code = f"clawstore {__version__} without sources".encode()
    return blake3.blake3(code).digest()


_CODE_TAG = _code_tag()


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


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


_CELL: dict[str, Callable[[Any], Any]] = {"VARCHAR": _str, "DOUBLE": _num, "INTEGER": _int32, "BIGINT": _int,
                                          "BOOLEAN": _bool}


def _cells(source: Mapping[str, Any], columns: list[Column]) -> Row:
    """The cells of `columns` taken from `source` by their names, each made what its column holds."""
    return {c.name: _CELL[c.type](source.get(c.name)) for c in columns}


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
    """The columns every kind shares, from the build log's node entry and its record: the `nodes` row itself,
    its keys in that table's order (tests/query/test_rows.py), so it is not picked again."""
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
        "cacheable": _bool(rec.get("cacheable")),
        "model_id": _str(address.get("model_id")),
        "case_id": _str(address.get("case_id")),
        "repetition": _int32(address.get("repetition")),
        "judge_run_id": _str(address.get("judge_run_id")),
        "judge_repetition": _int32(address.get("judge_repetition")),
        "error_code": _str(error.get("code", summary.get("error_code"))),
        "error_message": _shown_text(_str(error.get("message", summary.get("error_message")))),
        "prompt_warning": _str(summary.get("prompt_warning")),
        **{name: _int(metrics.get(name)) for name in TOKEN_METRICS},
        **_cost_columns(_str(node.get("kind") or rec.get("kind")), node.get("action"), record),
        **{f"{name}_known": _known_tokens(metrics, name) for name in KNOWN_TOKENS},
        "latency_s": _num(metrics.get("latency_s")),
        "started_at": to_timestamp(rec.get("started_at")),
        "finished_at": to_timestamp(rec.get("finished_at")),
        **ctx,
    }


def _cost_columns(kind: str | None, action: Any, record: Mapping[str, Any] | None) -> Row:
    """cost_usd and cost_source: NULL cost is unknown, never 0. Checks and results call no provider
    (0, no source); a paid node never sent (skip) cost 0; one that failed without a record, unknown."""
    if kind not in PAID_KINDS:
        return {"cost_usd": 0.0, "cost_source": None, "cost_known_usd": 0.0}
    if record is None:
        return {"cost_usd": 0.0, "cost_source": None, "cost_known_usd": 0.0} if action == "skip" else \
            {"cost_usd": None, "cost_source": UNKNOWN, "cost_known_usd": 0.0}
    metrics = _dict(record.get("metrics"))
    source = source_of(metrics)
    cost = None if source == UNKNOWN else _num(metrics.get("cost_usd"))
    return {"cost_usd": cost, "cost_source": source,
            "cost_known_usd": CostSum.of_metrics(metrics).known_usd if cost is None else cost}


def _known_tokens(metrics: Mapping[str, Any], name: str) -> int:
    """The known part of a token count: the count when known; unknown, what the node spent at least (0: none known)."""
    count = _int(metrics.get(name))
    return count if count is not None else _int(metrics.get(f"{name}_known")) or 0


_NAMES: dict[str, tuple[str, ...]] = {table: tuple(c.name for c in cols) for table, cols in PHYSICAL.items()}


def _pick(table: str, row: Row) -> Row:
    """The cells of `table`'s columns, in its order (`dict(zip(...))`: a comprehension per row was a twentieth of a
    refresh)."""
    names = _NAMES[table]
    return dict(zip(names, map(row.get, names), strict=True))


def _shown_text(text: str | None) -> str | None:
    """An error message as claw shows it: a URL in it with its password masked (a record made before session 62)."""
    return shown_text(text) if text is not None else None


def _run_row(base: Row, rec: Mapping[str, Any]) -> Row:
    summary = _dict(rec.get("summary"))
    outputs = _dict(rec.get("outputs"))
    row = _pick("runs", base)
    row.update(
        input_document_id=_str(outputs.get("input_document", base["key"])),
        artifact_id=_str(outputs.get("artifact")),
        sandbox_id=_str(outputs.get("sandbox")),
        output_ids=sorted({str(v) for v in outputs.values() if isinstance(v, str)}),
        **_cells(summary, RUN_SUMMARY),
    )
    if row["error_code"] is None:
        row["error_code"] = _str(summary.get("error_code"))
    if row["endpoint"] is not None:  # (a base_url stored before session 62 may hold a password: never shown)
        row["endpoint"] = shown_url(row["endpoint"])
    return row


def _check_rows(base: Row, rec: Mapping[str, Any]) -> list[Row]:
    summary = _dict(rec.get("summary"))
    rows = []
    for check in summary.get("checks") or []:
        check = _dict(check)
        dims = check.get("dimensions")
        row = _pick("checks", base)
        row.update(
            run_key=_str(summary.get("run_key")),
            **_cells(check, CHECK_FIELDS),
            dimensions=[str(d) for d in dims] if isinstance(dims, list) else None,
        )
        rows.append(row)
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
    row = _pick("judgements", base)
    row.update(
        run_key=_str(summary.get("run_key")),
        **_cells(summary, JUDGE_SUMMARY),
        overall_score=_num(summary.get("overall_score")),
        **_dimension_values(summary.get("dimensions")),
    )
    return row


def plus(total: float | None, cost_usd: Any) -> float | None:
    """`total` (a sum of costs in node order, None once one is unknown) with `cost_usd` added: the `usd` of
    CostSum sums, the same float in the same order, without two CostSum objects a node (a tenth of a refresh
    that copies rows)."""
    if total is None:
        return None
    cost = known_cost(cost_usd)
    return None if cost is None else total + cost


def scored_run(run: Mapping[str, Any] | None, eval_cost: float | None) -> Row:
    """The columns of a result row that come from the rest of its build: its run, its evaluation's costs
    (`eval_cost`: their sum, `plus`; NULL when any part is unknown; a result without its run in the build has no run
    cost)."""
    run_cost = run.get("cost_usd") if run else None
    return {
        "run_status": run.get("status") if run else None,
        "latency_s": run.get("latency_s") if run else None,
        "run_cost_usd": run_cost,
        "eval_cost_usd": eval_cost,
        "total_cost_usd": plus(eval_cost, run_cost) if run else None,
    }


def _result_row(base: Row, rec: Mapping[str, Any], run: Mapping[str, Any] | None, eval_cost: float | None) -> Row:
    summary = _dict(rec.get("summary"))
    row = _pick("results", base)
    row.update(
        run_key=_str(summary.get("run_key")),
        final_score=_num(summary.get("final_score")),
        **_dimension_values(summary.get("final_dimensions")),
        **_cells(summary, RESULT_SUMMARY),
        **scored_run(run, eval_cost),
    )
    return row


def build_nodes(log: Mapping[str, Any], load_record: RecordLoader, head: Mapping[str, Any] | None = None
                ) -> list[Mapping[str, Any]]:
    """The nodes whose rows a build log (or a campaign head) gives: those it lists, then those the head
    it wrote says it reused (`head`: that head, if the caller read it: written_head)."""
    head = written_head(log, load_record) if head is None else head
    return [_dict(node) for node in [*(log.get("nodes") or []), *reused_nodes(log, head.get("nodes") or [])]]


def written_head(log: Mapping[str, Any], load_record: RecordLoader) -> Mapping[str, Any]:
    """The head a format-2 build wrote, its nodes inline; empty when it wrote none (a no-op build) or
    the log is no such build's."""
    head_id = log.get("head")
    if log.get("format") != 2 or not log.get("head_written") or not isinstance(head_id, str):
        return {}
    return without_planning_views(inline_or_none(load_record(head_id), load_record)) or {}


def without_planning_views(head: Any) -> Any:
    """A head with its nodes' `record_doc` (the planning view of each record, for the next build) left
    out: rows never read it, and the 40,000 of a campaign, held through its flattening, cost a third
    more memory."""
    nodes = head.get("nodes") if isinstance(head, dict) else None
    if not isinstance(nodes, list):
        return head
    return {**head, "nodes": [{name: value for name, value in node.items() if name != "record_doc"}
                              if isinstance(node, dict) else node for node in nodes]}


def node_sig(node: Mapping[str, Any]) -> int:
    """A 64-bit signature of what a node's rows read of the node itself (all but its action, which the
    copy sets): two nodes with one record and one signature have the same rows, but for the build's
    own columns. A BIGINT column of every segment (query/copied.py)."""
    get = node.get  # (keys in the order stored: canonical JSON sorts them; another order copies nothing)
    text = repr((get("kind"), get("key"), get("record"), get("address"), get("error"), get("status"),
                 get("action") == "fail"))
    return int.from_bytes(blake3.blake3(_CODE_TAG + text.encode()).digest(8), "little", signed=True)


def same_rows(log: Mapping[str, Any], log_sigs: Sequence[int], log_actions: Sequence[Any], head: Mapping[str, Any],
              head_nodes: Iterable[Mapping[str, Any]]) -> bool:
    """Are the rows of `head` (its nodes streamed: `head_nodes`) those of `log` (in another order)? Yes when both have
    one context and the same nodes as rows read them; then a query that indexed the build need not flatten the
    campaign again for its head. `log_sigs`, `log_actions`: the signatures and actions of the log's nodes (its own
    and those it reused), in one order. Held as sorted signatures an action, 8 bytes a node, not the nodes. Details:
    docs/query.md (Details by module)."""
    if build_context(head) != build_context(log):
        return False
    return _sig_bags(zip(log_sigs, log_actions, strict=True)) == _sig_bags(
        (node_sig(node), node.get("action")) for node in head_nodes)


def _sig_bags(pairs: Iterable[tuple[int, Any]]) -> dict[str, list[int]]:
    """{action: its nodes' signatures, sorted}: the multiset of (signature, action) pairs (an action not text by its
    repr: a hostile head's list is no key)."""
    bags: dict[str, array[int]] = {}
    for sig, action in pairs:
        bag = bags.get(name := action if isinstance(action, str) else repr(action))
        if bag is None:
            bag = bags[name] = array("q")
        bag.append(sig)
    return {name: sorted(bag) for name, bag in bags.items()}


class Reusable(NamedTuple):
    """A segment or head directory, and the nodes whose rows it holds once: {(record id, node_sig): Facts}, packed."""

    source: Path
    facts: FactTable


class RowMeta(NamedTuple):
    """Per row of `Flattened.tables`: where its node stands, and the hidden columns the writer adds."""

    position: int
    sig: int | None  # None when the record could not be read: such rows are never copied
    run_key: str | None  # the record's run_key (kept for `nodes` rows)


class Flattened(NamedTuple):
    """A build's rows: those made here, and the nodes whose rows are copied from `source`. Rows a `Spill`
    sink wrote to files are in `spilled` (that directory's `<table>.json`), not in `tables`."""

    tables: dict[str, list[Row]]
    meta: dict[str, list[RowMeta]]
    taken: TakenNodes  # (iterated: each a Taken)
    ctx: Row
    source: Path | None
    sigs: Sequence[int]  # node_sig of every node, in node order
    spilled: Path | None = None


class RowSink(Protocol):
    """Where `flatten` puts rows as it makes them; result rows wait in it for their run's costs (`hold`)."""

    tables: dict[str, list[Row]]
    meta: dict[str, list[RowMeta]]
    spilled: Path | None

    def add(self, table: str, row: Row, meta: RowMeta) -> None: ...

    def hold(self, at: int, row: Row | None, run_key: str | None) -> None: ...

    def held(self) -> Iterator[tuple[int, Row | None, str | None]]: ...


class Collected:
    """The RowSink that keeps every row in memory (`claw report`, a rebuilt manifest, the benches)."""

    spilled: Path | None = None

    def __init__(self) -> None:
        self.tables: dict[str, list[Row]] = {name: [] for name in PHYSICAL}
        self.meta: dict[str, list[RowMeta]] = {name: [] for name in PHYSICAL}
        self._held: list[tuple[int, Row | None, str | None]] = []

    def add(self, table: str, row: Row, meta: RowMeta) -> None:
        self.tables[table].append(row)
        self.meta[table].append(meta)

    def hold(self, at: int, row: Row | None, run_key: str | None) -> None:
        self._held.append((at, row, run_key))

    def held(self) -> Iterator[tuple[int, Row | None, str | None]]:
        yield from self._held


def rows_for_build(log: Mapping[str, Any], load_record: RecordLoader, read_ahead: ReadAhead | None = None,
                   nodes: list[Mapping[str, Any]] | None = None) -> dict[str, list[Row]]:
    """All manifest rows for one build log: {physical table: rows}. `load_record(oid)` reads a record;
    `read_ahead`, if given, hears of the next READ_AHEAD records before they are asked for; `nodes`:
    the log's `build_nodes`, if the caller has them."""
    return flatten(log, load_record, read_ahead, nodes).tables


def flatten(log: Mapping[str, Any], load_record: RecordLoader, read_ahead: ReadAhead | None = None,
            nodes: Iterable[Mapping[str, Any]] | None = None, reusable: Reusable | None = None,
            sink: RowSink | None = None) -> Flattened:
    """rows_for_build, but a node that `reusable` holds (its record, its signature) is neither read nor
    flattened: it is listed in `taken` for the writer to copy its rows from `reusable.source`. The rows go
    to `sink` (default: kept in memory) as they are made, READ_AHEAD nodes at a time: with a sink that
    writes them out, what stays in memory is a window of records and a few facts per run (docs/query.md,
    Scale)."""
    ctx = build_context(log)
    sink = Collected() if sink is None else sink
    nodes = build_nodes(log, load_record) if nodes is None else nodes
    sigs = array("q")
    known = reusable.facts if reusable is not None and reusable.facts else None
    taken = TakenNodes(known)
    runs_by_key: dict[str, tuple[Any, Any, Any]] = {}  # run key -> (status, latency_s, cost_usd)
    eval_cost: dict[str, float | None] = {}  # run key -> its evaluation's cost (plus: None once one is unknown)
    spent: float | None = 0.0  # of every node (the builds row)
    count = 0
    iterator = iter(nodes)
    while window := list(islice(iterator, READ_AHEAD)):
        first = count
        facts: dict[int, Facts] = {}
        for at, node in enumerate(window, first):
            sig = node_sig(node)
            sigs.append(sig)
            oid = node.get("record")
            if known is not None and isinstance(oid, str) and (entry := known.lookup(oid, sig)) is not None:
                facts[at] = known.facts_at(entry)
                taken.add(at, entry, _str(node.get("action")))
        count += len(window)
        if read_ahead is not None and len(facts) < len(window):
            read_ahead([oid for at, node in enumerate(window, first)
                        if at not in facts and isinstance(oid := node.get("record"), str) and oid])
        for at, node in enumerate(window, first):
            fact = facts.get(at)
            if fact is not None:
                spent = plus(spent, fact.cost_usd)
                if fact.kind in ("checks", "judge", "result") and fact.run_key:
                    eval_cost[fact.run_key] = plus(eval_cost.get(fact.run_key, 0.0), fact.cost_usd)
                if fact.kind == "run" and fact.key:
                    runs_by_key[fact.key] = (fact.status, fact.latency_s, fact.cost_usd)
                elif fact.kind == "result":
                    sink.hold(at, None, fact.run_key)
                continue
            spent = plus(spent, _flatten_node(RowMeta(at, sigs[at], None), node, load_record, ctx, sink,
                                              runs_by_key, eval_cost))
        window.clear()
    # Results come last: their costs need every run and judge of the build.
    for at, row, run_key in sink.held():
        found = runs_by_key.get(run_key or "")
        run = {"status": found[0], "latency_s": found[1], "cost_usd": found[2]} if found is not None else None
        scored = scored_run(run, eval_cost.get(run_key or "", 0.0))
        if row is None:
            taken.score(at, scored)
        else:
            row.update((name, value) for name, value in scored.items() if name in row)
            sink.add("results", row, RowMeta(at, sigs[at], run_key))
    sink.add("builds", _build_row(log, ctx, count, spent), RowMeta(-1, None, None))
    # (the facts let go here, before the writer's DuckDB: packed.TakenNodes.detach)
    return Flattened(sink.tables, sink.meta, taken.detach(), ctx,
                     reusable.source if reusable is not None and taken else None, sigs, sink.spilled)


def _flatten_node(meta: RowMeta, node: Mapping[str, Any], load_record: RecordLoader, ctx: Row, sink: RowSink,
                  runs_by_key: dict[str, tuple[Any, Any, Any]], eval_cost: dict[str, float | None]) -> float | None:
    """Read one node's record and give its rows to `sink` (a result's held for its run's costs); the node's
    cost_usd. `meta`: its position and signature."""
    oid = node.get("record")
    record = load_record(oid) if isinstance(oid, str) and oid else None
    base = _node_row(node, record, ctx)
    run_key = _str(_dict(record.get("summary")).get("run_key")) if record is not None else None
    row_meta = RowMeta(meta.position, meta.sig if record is not None else None, run_key)
    sink.add("nodes", base, row_meta)  # (its keys are the nodes columns, in order: _node_row)
    if record is None:
        return base["cost_usd"]
    kind = base["kind"]
    if kind in ("checks", "judge", "result") and run_key:
        eval_cost[run_key] = plus(eval_cost.get(run_key, 0.0), base["cost_usd"])
    if kind == "run":
        row = _run_row(base, record)
        sink.add("runs", row, row_meta)
        if row["key"]:
            runs_by_key[row["key"]] = (row["status"], row["latency_s"], row["cost_usd"])
    elif kind == "checks":
        for check in _check_rows(base, record):
            sink.add("checks", check, row_meta)
    elif kind == "judge":
        sink.add("judgements", _judge_row(base, record), row_meta)
    elif kind == "result":
        sink.hold(meta.position, _result_row(base, record, None, 0.0), run_key)
    return base["cost_usd"]


def reused_nodes(log: Mapping[str, Any], head_nodes: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """What a format-2 build reused, from the nodes of the head it wrote (`written_head`, or its parts streamed; a
    no-op build wrote none: nothing to add).

    Its log lists only what it executed, failed or skipped; the head it wrote carries every node it
    planned with this build's action (within its --case/--model filter, if any)."""
    flt = _dict(log.get("filter"))
    cases, models = set(flt.get("cases") or ()), set(flt.get("models") or ())
    for node in head_nodes:
        node = _dict(node)
        if node.get("action") != "reuse":
            continue
        address = _dict(node.get("address"))
        if (cases and address.get("case_id") not in cases) or (models and address.get("model_id") not in models):
            continue
        yield {name: node.get(name) for name in ("kind", "key", "record", "action", "address")}


def _build_row(log: Mapping[str, Any], ctx: Row, count: int, spent: float | None) -> Row:
    """`count`: the nodes flattened; `spent`: the sum of their cost_usd, in node order (None: one is unknown)."""
    counts = _dict(log.get("counts"))
    metrics = _dict(log.get("metrics"))
    # A log still "running" is a killed build's (queries index it once its lease is gone): written every 2 s, it
    # stops short of what the build paid for, so its spending (its known part, its input and output tokens) is
    # unknown, never the smaller sum the log holds (0 tokens for a build killed with its first requests in flight).
    killed = log.get("state") == "running"
    # A format-2 build that wrote no head (a no-op's) lists no node it reused: its rows hold none, so the cost of what
    # it used is not known here (NULL), never the 0 of a sum over nothing.
    unlisted = log.get("format") == 2 and not log.get("head_written") and bool(_int(counts.get("reused")))
    return {
        "build_id": ctx["build_id"],
        "started_at": ctx["build_started_at"],
        "finished_at": to_timestamp(log.get("finished_at")),
        "state": _str(log.get("state")),
        "campaign_id": ctx["campaign_id"],
        "suite_id": ctx["suite_id"],
        "run_profile_id": ctx["run_profile_id"],
        "evaluation_profile_id": ctx["evaluation_profile_id"],
        "nodes": sum(_int(v) or 0 for v in counts.values()) if log.get("format") == 2 else count,
        **{name: _int32(counts.get(name)) for name in COUNTERS.values()},
        **{name: _int(metrics.get(name)) for name in TOKEN_METRICS},
        **(dict.fromkeys(UNKNOWN_WHEN_PART_IS) if killed or metrics.get(TOKENS_UNKNOWN) else {}),  # (sums: known)
        **_build_cost(metrics),
        **({"cost_usd": None, "cost_known_usd": None} if killed else {}),  # (its known part as short: 0.0 paid)
        "results_cost_usd": None if killed or unlisted else spent,
    }


def _build_cost(metrics: Mapping[str, Any]) -> Row:
    spent = CostSum.of_build(metrics)
    return {"cost_usd": spent.usd, "cost_known_usd": spent.known_usd, "cost_priced": spent.priced,
            "cost_unknown": spent.unknown}
