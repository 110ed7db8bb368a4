"""Flatten nodes into manifest rows inside DuckDB: Python writes each node and its record's stored bytes as one JSON
line, SQL makes every table's rows (the cells rows.py makes). Where a record is not what claw writes, it gives way to
rows.flatten. When it is used, and the figures: docs/query.md (Scale)."""

from __future__ import annotations

import queue
import shutil
import threading
from array import array
from collections.abc import Iterable, Mapping
from itertools import islice
from pathlib import Path
from typing import Annotated, Any, Literal

import duckdb
import msgspec

from clawstore.query import copied, duck, rows
from clawstore.query.jsonarray import encode
from clawstore.query.packed import TakenNodes
from clawstore.query.rows import Flattened, Row, _build_row, build_context, node_sig
from clawstore.query.schema import (
    CHECK_FIELDS,
    DIMENSIONS,
    HISTORY_VIEW,
    JUDGE_SUMMARY,
    PHYSICAL,
    RESULT_SUMMARY,
    RUN_SUMMARY,
    Column,
)
from clawstore.query.segments import ROW_GROUP
from clawstore.query.sqltext import literal
from clawstore.store.documents import KNOWN_TOKENS, TOKEN_METRICS
from clawstore.store.face import ObjectReader
from clawstore.values.bounds import MAX_LATENCY_S, MAX_RECORD_COST_USD, MAX_RECORD_TOKENS
from clawstore.values.costs import PAID_KINDS, SOURCES
from clawstore.values.urls import shown_text, shown_url

# What DuckDB may hold while it flattens, whatever the campaign: past it, it spills to the work directory, or its
# statement fails and rows.py flattens the head (docs/query.md, Scale).
MEMORY_LIMIT = "128MB"
LINES = "nodes.jsonl"
CHUNK_NODES = 16384  # nodes per file of lines: DuckDB reads one while Python writes the next

# rows.py's cells (_str, _int32, to_timestamp) of a JSON value of a map read_json gives (the node's and record's
# address, error, outputs), and `ts_`: a time as rows.py reads it, null where rows.py would parse it otherwise (which
# makes the caller give way to it).
MACROS = [
    # A JSON value read_json gives comes minified, so its first character says its type: most cells need no parse.
    "CREATE MACRO t_(j) AS CAST(j AS VARCHAR)",
    # Each on the text of a JSON value (`v`), computed once a row (_HELPERS): a macro's argument is pasted where it is
    # used, so a map's value looked up inside them was looked up up to ten times.
    "CREATE MACRO sv_(v) AS CASE WHEN starts_with(v, '\"') THEN (CASE WHEN contains(v, '\\') "
    "THEN json_extract_string(v, '$') ELSE v[2:-2] END) END",
    "CREATE MACRO s_(j) AS sv_(t_(j))",
    "CREATE MACRO f_(x) AS CASE WHEN isfinite(x) THEN x END",
    "CREATE MACRO int_of(x) AS CASE WHEN x = trunc(x) AND x >= -9223372036854775808.0 "
    "AND x < 9223372036854775808.0 THEN CAST(x AS BIGINT) END",
    # (TRY_CAST('1.5' AS BIGINT) rounds: a number with a fraction or an exponent goes by DOUBLE, as Python's float)
    "CREATE MACRO iv_(v) AS CASE WHEN v = 'true' THEN 1 WHEN v = 'false' THEN 0 "
    "WHEN contains(v, '.') OR contains(v, 'e') OR contains(v, 'E') THEN int_of(TRY_CAST(v AS DOUBLE)) "
    "ELSE TRY_CAST(v AS BIGINT) END",
    "CREATE MACRO i32v_(v) AS CASE WHEN iv_(v) BETWEEN -2147483648 AND 2147483647 THEN CAST(iv_(v) AS INTEGER) END",
    # Only the times claw writes (datetime.isoformat: six digits or none, Z or an offset) are read here.
    "CREATE MACRO ts_(v) AS CASE WHEN regexp_full_match(v, "
    r"'[12]\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{6})?(Z|[+-]\d{2}:\d{2})')"
    " THEN CAST(TRY_CAST(v AS TIMESTAMPTZ) AS TIMESTAMP) END",
    "CREATE MACRO sum_(xs) AS list_reduce(list_prepend(CAST(0 AS DOUBLE), xs), lambda a, b: a + b)",
]

_ADDRESS = ("model_id", "case_id", "repetition", "judge_run_id", "judge_repetition")
_SUMMARY = list({c.name: c for c in [  # (a name once: `attempts` is a run's and a judgement's)
    *(Column(name, "INTEGER" if name.endswith("repetition") else "VARCHAR", "") for name in _ADDRESS),
    *(Column(name, "VARCHAR", "") for name in ("error_code", "error_message", "run_key")),
    *RUN_SUMMARY, *JUDGE_SUMMARY, *RESULT_SUMMARY,
    Column("overall_score", "DOUBLE", ""), Column("final_score", "DOUBLE", ""),
]}.values())
_INT = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_PY = {"VARCHAR": str, "DOUBLE": float, "INTEGER": _INT, "BIGINT": _INT, "BOOLEAN": bool}
_SQL = {"VARCHAR": "VARCHAR", "DOUBLE": "DOUBLE", "INTEGER": "BIGINT", "BIGINT": "BIGINT", "BOOLEAN": "BOOLEAN"}


def _typed(name: str, columns: Iterable[Column], **nested: Any) -> Any:
    """A msgspec type: an object whose `columns` are each null or of its column's type, exactly (no bool for a
    number, no number for a text: rows.py would read those otherwise); other keys are not read."""
    return msgspec.defstruct(name, [*((c.name, _PY[c.type] | None, None) for c in columns),
                                    *((key, typ | None, None) for key, typ in nested.items())])


def _amount(high: float) -> Any:
    return Annotated[float, msgspec.Meta(ge=0, le=high)]


_DIMS = _typed("Dims", (Column(d, "DOUBLE", "") for d in DIMENSIONS))
_CHECK = _typed("Check", CHECK_FIELDS, dimensions=list[str])
_METRICS = msgspec.defstruct("Metrics", [  # store/documents.py metrics_problem: a record it names gives way
    *((name, Annotated[int, msgspec.Meta(ge=0, le=MAX_RECORD_TOKENS)] | None, None) for name in TOKEN_METRICS),
    ("cost_usd", _amount(MAX_RECORD_COST_USD) | None, None), ("latency_s", _amount(MAX_LATENCY_S) | None, None),
    ("cost_source", Literal[SOURCES] | None, None), ("cost_known_usd", _amount(MAX_RECORD_COST_USD) | None, None),
    *((f"{name}_known", Annotated[int, msgspec.Meta(ge=0, le=MAX_RECORD_TOKENS)] | None, None)
      for name in KNOWN_TOKENS)])
_BASE = _SUMMARY[:8]  # what rows.py reads of every record's summary; then what it reads of each kind's:
_KIND_SUMMARY = {
    "run": (RUN_SUMMARY, {}),
    "checks": ([], {"checks": list[_CHECK]}),
    "judge": ([*JUDGE_SUMMARY, _SUMMARY[-2]], {"dimensions": _DIMS}),
    "result": ([*RESULT_SUMMARY, _SUMMARY[-1]], {"final_dimensions": _DIMS}),
}


# An address as Python checks it: a key present as null (None) told from an absent one (UNSET), because SQL reads the
# address as a STRUCT, where both are NULL, and is told of the keys present as null on the line (_nulls).
_SEEN_ADDRESS = msgspec.defstruct("SeenAddress", [
    (c.name, _PY[c.type] | None | msgspec.UnsetType, msgspec.UNSET) for c in _SUMMARY[:5]])


def _record_type(kind: str | None) -> Any:
    """The records of `kind` flattened here (any other: rows.py). Error and outputs are read by SQL as maps, where a
    key present as null is not an absent one, the address as a STRUCT told of its keys present as null (_nulls);
    `status` must be there (rows.py reads the node's otherwise)."""
    columns, nested = _KIND_SUMMARY.get(kind or "", ([], {}))
    return msgspec.defstruct(f"Record_{kind}", [
        *((name, str | None, None) for name in ("kind", "key", "build_id", "started_at", "finished_at")),
        ("status", str), ("cacheable", bool | None, None),
        ("address", _SEEN_ADDRESS | None, None),
        ("error", _typed("Error", (Column(n, "VARCHAR", "") for n in ("code", "message"))) | None, None),
        ("outputs", _typed("Outputs", (Column(n, "VARCHAR", "") for n in ("input_document", "artifact", "sandbox")))
         | None, None),
        ("metrics", _METRICS | None, None),
        ("summary", _typed(f"Summary_{kind}", [*_BASE, *columns], **nested) | None, None)], kw_only=True)


_RECORDS = {kind: msgspec.json.Decoder(_record_type(kind)) for kind in [*_KIND_SUMMARY, None]}
_NODES = msgspec.json.Decoder(msgspec.defstruct("Node", [
    *((name, str | None, None) for name in ("kind", "key", "record", "action", "status")),
    ("address", _typed("Address", _SUMMARY[:5]) | None, None),
    ("error", _typed("Error", (Column(n, "VARCHAR", "") for n in ("code", "message"))) | None, None)]))


def _struct(columns: Iterable[Column], **nested: str) -> str:
    return "STRUCT(" + ", ".join([*(f'"{c.name}" {_SQL[c.type]}' for c in columns),
                                  *(f'"{name}" {typ}' for name, typ in nested.items())]) + ")"


_DIMS_SQL = _struct(Column(d, "DOUBLE", "") for d in DIMENSIONS)
# The same, as read_json reads it: an object with a duplicate key fails the read, and the caller gives way.
_MAP = "MAP(VARCHAR, JSON)"
# An address's five keys typed (each checked in Python to be null or of its type): a MAP of JSON values, parsed
# again for each cell, was a sixth of DuckDB's step. A key present as null is named on the line instead (_nulls).
_ADDRESS_SQL = _struct(_SUMMARY[:5])
_RECORD_SQL = _struct(
    (Column(n, "VARCHAR", "") for n in ("kind", "key", "build_id", "status", "started_at", "finished_at")),
    cacheable="BOOLEAN", address=_ADDRESS_SQL, error=_MAP, outputs=_MAP,
    metrics=_struct((*(Column(n, "BIGINT", "") for n in TOKEN_METRICS), Column("cost_usd", "DOUBLE", ""),
                     Column("latency_s", "DOUBLE", ""), Column("cost_source", "VARCHAR", ""),
                     Column("cost_known_usd", "DOUBLE", ""),
                     *(Column(f"{n}_known", "BIGINT", "") for n in KNOWN_TOKENS))),
    summary=_struct(_SUMMARY, dimensions=_DIMS_SQL, final_dimensions=_DIMS_SQL,
                    checks=_struct(CHECK_FIELDS, dimensions="VARCHAR[]") + "[]"))
_NODE_SQL = _struct((Column(n, "VARCHAR", "") for n in ("kind", "key", "record", "action", "status")),
                    address=_ADDRESS_SQL, error=_MAP)


def _in(values: Iterable[str]) -> str:
    return "(" + ", ".join(literal(v) for v in values) + ")"


def _cell(column: Column, value: str) -> str:
    """rows.py's cell of a typed value read_json gave: only what a column cannot hold changes."""
    if column.type == "DOUBLE":
        return f"f_({value})"
    if column.type == "INTEGER":
        return f"CASE WHEN {value} BETWEEN -2147483648 AND 2147483647 THEN {value} END"
    return value


def _flat_sql(lines: Path) -> str:
    """One row per node: the `nodes` table's cells (rows._node_row), what the other tables add, and `odd` (a time
    rows.py reads otherwise; nodes and records were checked in Python)."""
    summary = {c.name: _cell(c, f'r.summary."{c.name}"') for c in _SUMMARY}

    def address(name: str) -> str:  # (the node's, else the record's, else its summary's: rows._node_row)
        column = next(c for c in _SUMMARY if c.name == name)
        node, rec = f'n.address."{name}"', f'r.address."{name}"'
        return (f"CASE WHEN {node} IS NOT NULL OR list_contains(nz, '{name}') THEN {_cell(column, node)} "
                f"WHEN {rec} IS NOT NULL OR list_contains(rz, '{name}') THEN {_cell(column, rec)} "
                f"ELSE {summary[name]} END")

    paid = f"coalesce(kind IN {_in(PAID_KINDS)}, false)"
    base = {
        "has_record": "r.status IS NOT NULL",  # (every record read here has one)
        "kind": "n.kind", "key": "CASE WHEN n.key <> '' THEN n.key ELSE r.key END",
        "record_id": "n.record", "action": "n.action", "record_build_id": "r.build_id",
        "status": "CASE WHEN has_record THEN r.status WHEN ns THEN n.status WHEN n.action = 'fail' THEN 'failed' END",
        "cacheable": "r.cacheable", **{name: address(name) for name in _ADDRESS},
        "error_map": "CASE WHEN cardinality(r.error) > 0 THEN r.error ELSE n.error END",
        "error_code": ("CASE WHEN map_contains(error_map, 'code') THEN s_(error_map['code']) "
                       "ELSE r.summary.error_code END"),
        "error_message": ("CASE WHEN map_contains(error_map, 'message') THEN s_(error_map['message']) "
                          "ELSE r.summary.error_message END"),
        **{name: f"r.metrics.{name}" for name in TOKEN_METRICS},
        "source": ("CASE WHEN r.metrics.cost_source IS NOT NULL THEN r.metrics.cost_source "
                   "WHEN r.metrics.cost_usd IS NOT NULL THEN 'reported' ELSE 'unknown' END"),
        "cost_usd": f"CASE WHEN NOT {paid} THEN 0.0 WHEN NOT has_record THEN (CASE WHEN action = 'skip' THEN 0.0 END) "
                    "WHEN source = 'unknown' THEN NULL ELSE r.metrics.cost_usd END",
        "cost_source": f"CASE WHEN NOT {paid} THEN NULL WHEN NOT has_record THEN (CASE WHEN action = 'skip' THEN NULL "
                       "ELSE 'unknown' END) ELSE source END",
        "cost_known_usd": "coalesce(cost_usd, CASE WHEN has_record THEN r.metrics.cost_known_usd END, 0.0)",
        **{f"{name}_known": f"coalesce(r.metrics.{name}, CASE WHEN has_record THEN r.metrics.{name}_known END, 0)"
           for name in KNOWN_TOKENS},
        "latency_s": "r.metrics.latency_s", "started_at": "t_started", "finished_at": "t_finished",
        "summary_error_code": "r.summary.error_code",
        "input_document_id": ("CASE WHEN map_contains(r.outputs, 'input_document') "
                              "THEN sv_(o_input_document) ELSE key END"),
        "artifact_id": "sv_(o_artifact)", "sandbox_id": "sv_(o_sandbox)",
        "output_ids": ("coalesce(list_sort(list_distinct([sv_(v) FOR v IN CAST(map_values(r.outputs) AS VARCHAR[]) "
                       "IF starts_with(v, '\"')])), CAST([] AS VARCHAR[]))"),
        **{name: value for name, value in summary.items() if name not in (*_ADDRESS, "error_code", "error_message")},
        **{f"j_{d}": f"f_(r.summary.dimensions.{d})" for d in DIMENSIONS},
        **{f"f_{d}": f"f_(r.summary.final_dimensions.{d})" for d in DIMENSIONS},
        "checks": "r.summary.checks",
        "odd": "(r.started_at IS NOT NULL AND t_started IS NULL) OR (r.finished_at IS NOT NULL AND t_finished IS NULL)",
    }
    # (Later cells read earlier ones by name: has_record, kind, key, action, error_map, source.)
    cells = ", ".join(f'{sql} AS "{name}"' for name, sql in base.items())
    helpers = ", ".join(f'{sql} AS "{name}"' for name, sql in _HELPERS.items())
    return (
        f"SELECT * EXCLUDE (source, error_map) FROM (SELECT p, s, {cells} FROM (SELECT *, {helpers} "
        f"FROM read_json({literal(str(lines))}, format='newline_delimited', "
        f"columns={{p: 'BIGINT', s: 'BIGINT', ns: 'BOOLEAN', n: '{_NODE_SQL}', r: '{_RECORD_SQL}', "
        f"nz: 'VARCHAR[]', rz: 'VARCHAR[]'}})))")


# What several cells read, computed once a row (a cell's text is pasted into each macro that reads it): the text of
# three outputs, and the record's times.
_HELPERS = {
    **{f"o_{name}": f"t_(r.outputs['{name}'])" for name in ("input_document", "artifact", "sandbox")},
    "t_started": "ts_(r.started_at)", "t_finished": "ts_(r.finished_at)",
}


def scored_joins(flat: str) -> str:
    """The joins giving each result row `f` (by its run_key) its run `k.run` (the last of the key, by position) and
    its evaluation's costs `e.usd` (summed in node order), over `flat`: nodes with kind, key, status, latency_s,
    cost_usd, has_record, run_key and their position p (SCORED reads them; query/parted.py too)."""
    return (f"LEFT JOIN (SELECT key AS rk, arg_max({{'status': status, 'latency_s': latency_s, "
            f"'cost_usd': cost_usd}}, p) AS run FROM {flat} WHERE kind = 'run' AND has_record AND key <> '' "
            f"GROUP BY key) AS k ON k.rk = f.run_key "
            f"LEFT JOIN (SELECT run_key AS ek, sum_(list(cost_usd ORDER BY p)) AS usd FROM {flat} "
            f"WHERE has_record AND kind IN ('checks', 'judge', 'result') AND run_key <> '' GROUP BY run_key) AS e "
            f"ON e.ek = f.run_key")


SCORED = {  # rows.scored_run, from the build's last run of the key and the costs of its evaluation in node order
    "run_status": "k.run.status", "latency_s": "k.run.latency_s", "run_cost_usd": "k.run.cost_usd",
    "eval_cost_usd": "CASE WHEN e.ek IS NULL THEN 0.0 ELSE e.usd END",
    "total_cost_usd": "CASE WHEN k.rk IS NULL THEN NULL ELSE (CASE WHEN e.ek IS NULL THEN 0.0 ELSE e.usd END) "
                      "+ k.run.cost_usd END",
}
# Each table's rows: FROM, WHERE, ORDER BY and the cells that are not the node's. `nodes` takes `flat`'s own order
# (None), which is position order, kept by a plain scan under preserve_insertion_order: sorting its 200,000 rows again
# was two fifths of writing its file. The filtered tables stay sorted: unsorted, the filter's chunks cut their row
# groups elsewhere (the same rows, other bytes).
_SOURCES: dict[str, tuple[str, str, str | None, dict[str, str]]] = {
    "nodes": ("flat AS f", "true", None, {}),
    "runs": ("flat AS f", "f.kind = 'run' AND f.has_record", "f.p",
             {"error_code": "coalesce(f.error_code, f.summary_error_code)"}),
    "checks": ("(SELECT *, unnest(generate_series(1, len(checks))) AS sub FROM flat "
               "WHERE kind = 'checks' AND has_record) AS f", "true", "f.p, f.sub",
               {name: f'f.checks[f.sub]."{name}"' for name in [*(c.name for c in CHECK_FIELDS), "dimensions"]}),
    "judgements": ("flat AS f", "f.kind = 'judge' AND f.has_record", "f.p",
                   {d: f"f.j_{d}" for d in DIMENSIONS}),
    "results": ("flat AS f " + scored_joins("flat"), "f.kind = 'result' AND f.has_record", "f.p",
                {**{d: f"f.f_{d}" for d in DIMENSIONS}, **SCORED}),
}


def _copy_sql(table: str, ctx: Row, out: Path) -> str:
    """COPY the rows of `table` to `out` with the columns and types segments.write_tables gives them."""
    source, where, order, cells = _SOURCES[table]
    columns = []
    for column in [*PHYSICAL[table], *copied.HIDDEN[table]]:
        if column.name in cells:
            value = cells[column.name]
        elif column.name in ctx:
            value = literal(ctx[column.name])
        elif column.name == copied.SIG:
            value = "CASE WHEN f.has_record THEN f.s END"
        elif column.name == copied.RUN_KEY:
            value = "f.run_key"
        else:
            value = f'f."{column.name}"'
        columns.append(f'CAST({value} AS {column.type}) AS "{column.name}"')
    by = f" ORDER BY {order}" if order else ""
    return (f"COPY (SELECT {', '.join(columns)} FROM {source} WHERE {where}{by}) TO "
            f"{literal(str(out))} (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})")


def _write_lines(work: Path, nodes: Iterable[Any], store: ObjectReader, loader: _Loader) -> array[int] | None:
    """Each node, its signature and its record's stored bytes as one line, rows.READ_AHEAD records read at once, in
    files of CHUNK_NODES lines handed to `loader` as each is full; the signatures, or None where rows.py is to flatten
    (a node or record it reads otherwise, a record absent or unreadable: it says which) or DuckDB failed."""
    sigs = array("q")
    iterator = iter(nodes)
    while loader.failed is None:
        start = len(sigs)
        path = work / f"{LINES}.{start}"
        with open(path, "wb") as fh:
            while len(sigs) - start < CHUNK_NODES and (
                    window := list(islice(iterator, min(rows.READ_AHEAD, CHUNK_NODES - len(sigs) + start)))):
                lines = _lines(window, store, sigs)
                if lines is None:
                    return None
                fh.write(lines)
        loader.put(path)
        if len(sigs) - start < CHUNK_NODES:
            return sigs  # (the last file: DuckDB made its table from it, if none before, even empty)
    return None


def _lines(window: list[Any], store: ObjectReader, sigs: array[int]) -> bytes | None:
    """The lines of a window of nodes (their signatures added to `sigs`), or None: one is left to rows.py."""
    if any(type(node) is not dict or not isinstance(node.get("kind"), str) or not node["kind"]
           for node in window):  # (a node without its kind takes its record's: rows.py)
        return None
    found = store.get_many_bytes([oid for node in window if isinstance(oid := node.get("record"), str) and oid])
    lines = []
    for node in window:
        sig = node_sig(node)
        oid = node.get("record")
        data = found.get(oid) if isinstance(oid, str) and oid else b"null"
        if data is None or b"\n" in data or (record := _claw_record(data, node["kind"])) is _ODD:
            return None
        if _masked_by_rows(record, node):
            return None
        text = encode(node)
        if not _as_read_here(text):
            return None
        lines.append(b'{"p":%d,"s":%d,"ns":%b,"n":%b,"r":%b%b}\n'
                     % (len(sigs), sig, b"true" if "status" in node else b"false", text, data,
                        _nulls(node.get("address"), record.address if record is not None else None)))
        sigs.append(sig)
    return b"".join(lines)


class _Loader:
    """DuckDB's half of the first step, on a thread of its own: each file of lines Python finishes goes into the table
    `flat` while Python writes the next (DuckDB lets go of the GIL), so on two cores the step takes about the time of
    the slower half, not of both. One file waits at most: the disk holds two files of lines, whatever the campaign."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con.cursor()
        self._files: queue.Queue[Path | None] = queue.Queue(maxsize=1)
        self.failed: Exception | None = None
        self._made = False
        self._thread = threading.Thread(target=self._load, name="claw-sqlflat", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        while (path := self._files.get()) is not None:
            if self.failed is None:
                try:
                    verb = "INSERT INTO flat" if self._made else "CREATE TABLE flat AS"
                    self._con.execute(f"{verb} {_flat_sql(path)}").fetchall()
                    self._made = True
                except Exception as exc:  # (duckdb.Error: a record it cannot read; others: the caller raises them)
                    self.failed = exc
            path.unlink(missing_ok=True)

    def put(self, path: Path) -> None:
        self._files.put(path)

    def close(self) -> bool:
        """Wait for the files handed over; did every one load? (An error other than DuckDB's is raised here.)"""
        self._files.put(None)
        self._thread.join()
        self._con.close()
        if self.failed is not None and not isinstance(self.failed, duckdb.Error):
            raise self.failed
        return self.failed is None and self._made


def _as_read_here(node: bytes) -> bool:
    """Is this node (encoded) one whose cells SQL makes as rows.py does (_NODES)?"""
    try:
        _NODES.decode(node)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False
    return True


_ODD = object()  # (a record rows.py reads otherwise than SQL would)


def _masked_by_rows(record: Any, node: dict[str, Any]) -> bool:
    """Does rows.py show some of this node's text masked (a password in a base_url stored before session 62: in a
    run's endpoint, and in the error of a request to it)?"""
    summary = record.summary if record is not None else None
    endpoint = getattr(summary, "endpoint", None)
    if isinstance(endpoint, str) and shown_url(endpoint) != endpoint:
        return True
    node_error = node.get("error")
    errors = (getattr(summary, "error_message", None),
              record.error.message if record is not None and record.error is not None else None,
              node_error.get("message") if isinstance(node_error, dict) else None)
    return any(isinstance(text, str) and shown_text(text) != text for text in errors)


def _claw_record(record: bytes, kind: str) -> Any:
    """This record, of a node of `kind`, as its msgspec type decodes it where it is read here as rows.py reads it
    (_record_type); None for `null` (no record), else _ODD."""
    try:
        return _RECORDS.get(kind, _RECORDS[None]).decode(record)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None if record == b"null" else _ODD


def _nulls(node: Any, record: Any) -> bytes:
    """The line's `nz` and `rz`: the address keys the node's address (a dict) and the record's (a _SEEN_ADDRESS) hold
    as null, which SQL's STRUCT reads as it reads an absent key; rows.py tells them apart (the node's null wins over
    the record's value). Nothing, the common case."""
    extra = b""
    if type(node) is dict and None in node.values() and (names := [k for k in _ADDRESS if k in node
                                                                    and node[k] is None]):
        extra = b',"nz":' + msgspec.json.encode(names)
    if record is not None and None in msgspec.structs.astuple(record):
        extra += b',"rz":' + msgspec.json.encode([k for k in _ADDRESS if getattr(record, k) is None])
    return extra


def flatten_here(log: Mapping[str, Any], nodes: Iterable[Any], store: ObjectReader, work: Path) -> Flattened | None:
    """rows.flatten of `nodes` (none copied) by DuckDB: the history tables' Parquet files, with their hidden columns,
    in `work` (a Spill's directory: segments.write_tables takes them as they are), the builds row in `tables`. None
    where rows.py must flatten them (a record claw would not write, one absent: it warns, or leaves a null row); then
    `work` holds nothing it wrote."""
    con = duck.connect(threads=1, memory_limit=MEMORY_LIMIT, temp_directory=str(work / "spill"),
                       preserve_insertion_order=True)  # (the files' order rests on it: _SOURCES)
    found = None
    try:
        con.execute("SET TimeZone = 'UTC'").fetchall()
        for macro in MACROS:
            con.execute(macro).fetchall()
        loader = _Loader(con)
        try:
            sigs = _write_lines(work, nodes, store, loader)
        finally:
            loaded = loader.close()
        if sigs is not None and loaded:
            found = _tables(con, log, work)
    finally:
        con.close()
        shutil.rmtree(work / "spill", ignore_errors=True)
        for path in work.glob(f"{LINES}.*"):
            path.unlink()
    if found is None or sigs is None:
        for table in HISTORY_VIEW:
            (work / f"{table}.parquet").unlink(missing_ok=True)
        return None
    ctx, count, spent = found
    return Flattened({"builds": [_build_row(log, ctx, count, spent)]}, {}, TakenNodes(), ctx, None, sigs, work)


def _tables(con: duckdb.DuckDBPyConnection, log: Mapping[str, Any], work: Path
            ) -> tuple[Row, int, float | None] | None:
    """Each history table's file from `flat`: (context, nodes, their cost), or None when a node is odd."""
    try:
        odd, count, spent = con.execute("SELECT bool_or(odd), count(*), sum_(list(cost_usd ORDER BY p)) FROM flat"
                                        ).fetchone() or (None, 0, None)
        if odd:
            return None
        ctx = build_context(log)
        for table in HISTORY_VIEW:
            con.execute(_copy_sql(table, ctx, work / f"{table}.parquet")).fetchall()
    except duckdb.Error:
        return None
    return ctx, count, spent
