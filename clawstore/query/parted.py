"""The refresh that copies a head's unchanged parts: a new head's rows made from its campaign's previous head
directory part by part, so that the first query after a small build reads and flattens the parts the build changed
and DuckDB copies the rest, holding at most MEMORY whatever the campaign. Why a part's rows are not a
function of the part alone, what is recomputed, and the figures: docs/query.md (Details by module)."""

from __future__ import annotations

import json
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import duckdb

from clawstore.errors import StoreError
from clawstore.query import copied, segments, sqlflat
from clawstore.query import rows as rows_module
from clawstore.query.jsonarray import write_array
from clawstore.query.packed import TakenNodes
from clawstore.query.rows import Flattened, ReadAhead, RecordLoader, Row, RowMeta, flatten
from clawstore.query.schema import HISTORY_VIEW
from clawstore.query.spill import Spill
from clawstore.query.sqltext import literal
from clawstore.store.headdoc import head_fields, is_parted

PARTS = "parts.json"  # in a head's directory: its parts in node order, each with its nodes (beside rows.json)
# Past this share of a head's parts new, the part-level refresh gives way to the full one: DuckDB flattens a whole
# head faster than rows.py flattens most of it (sqlflat.py).
MOST_NEW = 0.5
# What DuckDB may hold while it writes the new head (spilling past it under the manifest's tmp/), whatever the campaign:
# the copied rows joined to the taken nodes (a few bytes a node) and sorted into the new order with the rows flattened
# here. At 10,000 x 5 after a real build segments.WRITE_MEMORY (128 MB) ran out of memory on that sort (the copying
# refresh did too, and fell back to flattening every node); docs/query.md (Details by module).
MEMORY = "256MB"
_KEPT, _TAKEN = "claw_kept", "claw_taken"
Parts = list[tuple[str, int]]


def write_parts(directory: Path, hexid: str, parts: Sequence[tuple[str, int]] | None) -> None:
    """parts.json in a head's directory not yet published, fsynced: read after a crash, it must say what its rows
    are (None: the rows are not in part order, e.g. a build's segment linked; no file)."""
    if parts is None:
        return
    doc = {"head": hexid, "rows": rows_module._CODE_TAG.hex(), "parts": [[part, count] for part, count in parts]}
    with open(directory / PARTS, "wb") as fh:
        fh.write(json.dumps(doc).encode())
        fh.flush()
        os.fsync(fh.fileno())


class OldParts(NamedTuple):
    at: dict[str, tuple[int, int]]  # part id -> (its first node's position, its nodes)
    nodes: int


def read_parts(directory: Path) -> OldParts | None:
    """The parts of a head's directory, if its rows came from this flattening (rows._CODE_TAG) in part order; None
    otherwise (no parts.json: a build's segment linked, an older claw; a damaged file)."""
    try:
        doc = json.loads((directory / PARTS).read_bytes())
        if doc.get("rows") != rows_module._CODE_TAG.hex() or not isinstance(doc.get("parts"), list):
            return None
        found: dict[str, tuple[int, int]] = {}
        at = 0
        for part, count in doc["parts"]:
            if not isinstance(part, str) or type(count) is not int or count < 0:
                return None
            found.setdefault(part, (at, count))
            at += count
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return OldParts(found, at)


class Layout(NamedTuple):
    """Where the new head's nodes come from, filled as its parts are walked (_nodes)."""

    kept: list[tuple[int, int, int, str | None]]  # (old start, new start, nodes, action): copied, cut by action
    new: list[tuple[int, int]]  # (first position among the nodes flattened here, its new position), a part each
    parts: Parts  # the new head's parts in order, with their nodes


def _action_runs(doc: Mapping[str, Any]) -> list[tuple[int, Any]]:
    """(end, action) of each run of the head's node_actions."""
    runs, at = [], 0
    for run in doc.get("node_actions") or []:
        if not (isinstance(run, list) and len(run) == 2 and type(run[1]) is int and run[1] > 0):
            raise StoreError("campaign head: node_actions: expected [action, count] runs covering its nodes")
        at += run[1]
        runs.append((at, run[0]))
    return runs


def _cut(start: int, count: int, runs: list[tuple[int, Any]]) -> Iterator[tuple[int, int, Any]]:
    """(start, nodes, action) of the positions [start, start + count), cut where the action changes."""
    at, end = start, start + count
    index = bisect_right(runs, at, key=lambda run: run[0])
    while at < end:
        if index == len(runs):
            raise StoreError("campaign head: node_actions: expected [action, count] runs covering its nodes")
        stop = min(end, runs[index][0])
        yield at, stop - at, runs[index][1]
        at, index = stop, index + 1


def _nodes(doc: Mapping[str, Any], old: OldParts, copyable: set[str],
           load_part: Callable[[str], Any], layout: Layout) -> Iterator[dict[str, Any]]:
    """The nodes of the parts not copied, each with its action, for `flatten`; `layout` filled as they are read
    (whole once they all are)."""
    runs = _action_runs(doc)
    position = flattened = 0
    for part_id in doc["node_parts"]:
        if part_id in copyable:
            old_start, count = old.at[part_id]
            layout.kept.extend((old_start + at - position, at, n, rows_module._str(action))
                               for at, n, action in _cut(position, count, runs))
        else:
            part = load_part(part_id)
            nodes = part.get("nodes") if isinstance(part, dict) else None
            if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
                raise StoreError(f"campaign head part {str(part_id)[:80]} is not a part of a campaign head")
            count = len(nodes)
            if count:
                layout.new.append((flattened, position))
            cuts = _cut(position, count, runs)
            for at, n, action in cuts:
                for node in nodes[at - position:at - position + n]:
                    yield node if action is None else {**node, "action": action}
            flattened += count
        layout.parts.append((part_id, count))
        position += count
    if position != (runs[-1][0] if runs else 0):
        raise StoreError("campaign head: node_actions: expected [action, count] runs covering its nodes")


class _Shifted(Spill):
    """A Spill whose rows take their node's position in the new head, not among the nodes flattened here."""

    def __init__(self, directory: Path, layout: Layout):
        super().__init__(directory)
        self._layout = layout

    def add(self, table: str, row: Row, meta: RowMeta) -> None:
        if table in copied.HIDDEN:
            starts = self._layout.new
            first, new = starts[bisect_right(starts, meta.position, key=lambda entry: entry[0]) - 1]
            meta = meta._replace(position=meta.position - first + new)
        super().add(table, row, meta)


def _copyable(con: duckdb.DuckDBPyConnection, source: Path, old: OldParts, wanted: set[str]) -> set[str]:
    """The parts of `wanted` whose rows the old directory holds so that they can be copied: each node's record read
    (the rows of a node without one read its action) and its signature held once in the file, which is how the other
    tables' rows are found (copied.copied_sql, by_sig)."""
    nodes = literal(str(source / "nodes.parquet"))
    total, bad_rows = con.execute(
        f"SELECT count(*), list(file_row_number) FILTER (WHERE NOT ok) FROM (SELECT file_row_number, "
        f"record_id IS NOT NULL AND {copied.SIG} IS NOT NULL AND count(*) OVER (PARTITION BY {copied.SIG}) = 1 AS ok "
        f"FROM read_parquet({nodes}, file_row_number=true))").fetchone() or (0, None)
    if total != old.nodes:
        raise StoreError("the previous head's parts.json does not describe its rows")
    starts = sorted((start, start + count, part) for part, (start, count) in old.at.items() if part in wanted)
    bad: set[str] = set()
    for row in bad_rows or ():
        index = bisect_right(starts, row, key=lambda entry: entry[0]) - 1
        if index >= 0 and row < starts[index][1]:
            bad.add(starts[index][2])
    return wanted - bad


def _load_kept(con: duckdb.DuckDBPyConnection, source: Path, layout: Layout, work: Path) -> None:
    """The copied nodes as `con`'s table copied.copied_sql joins with: each one's signature, new position and action
    (a few bytes a node: the table is held while every file is written)."""
    path = work / f"{_KEPT}.json"
    write_array(path, ({"old": old, "new": new, "n": n, "action": action} for old, new, n, action in layout.kept))
    con.execute(f"CREATE TEMP TABLE {_KEPT} AS SELECT * FROM read_json({literal(str(path))}, format='array', "
                "columns={'old': 'BIGINT', 'new': 'BIGINT', 'n': 'BIGINT', 'action': 'VARCHAR'})").fetchall()
    path.unlink()
    kept = (f"(SELECT file_row_number AS pos, {copied.SIG} AS sig, action AS was "
            f"FROM read_parquet({literal(str(source / 'nodes.parquet'))}, file_row_number=true)) AS s "
            f"ASOF JOIN {_KEPT} AS k ON s.pos >= k.old WHERE s.pos < k.old + k.n")
    # A node's signature covers whether its action is `fail`: where that changed, the row copied is not the one
    # flattening gives (rare: the full refresh then).
    changed = con.execute(f"SELECT count(*) FROM {kept} AND (s.was = 'fail') IS DISTINCT FROM (k.action = 'fail')"
                          ).fetchone()
    if changed and changed[0]:
        raise StoreError("a copied node's failure changed")
    con.execute(f"CREATE TEMP TABLE {_TAKEN} AS SELECT s.pos - k.old + k.new AS position, s.sig, k.action "
                f"FROM {kept}").fetchall()
    con.execute(f"DROP TABLE {_KEPT}").fetchall()


def _results(work: Path) -> Callable[[str, str], str]:
    """The writer's last step for `results`: each row's scored columns made over the new head's nodes (written
    first), as flattening gives them (sqlflat.SCORED)."""
    nodes = (f"(SELECT kind, key, status, latency_s, cost_usd, {copied.SIG} IS NOT NULL AS has_record, "
             f"{copied.RUN_KEY} AS run_key, file_row_number AS p "
             f"FROM read_parquet({literal(str(work / 'nodes.parquet'))}, file_row_number=true))")

    def shape(table: str, source: str) -> str:
        if table != "results":
            return source
        scored = ", ".join(f"{sql} AS {name}" for name, sql in sqlflat.SCORED.items())
        return (f"(SELECT f.* REPLACE ({scored}) FROM {source} AS f {sqlflat.scored_joins(nodes)} "
                "ORDER BY f._claw_pos, f._claw_sub)")

    return shape


def refresh(manifest: Path, doc: Mapping[str, Any], source: Path | None, records: RecordLoader,
            read_ahead: ReadAhead, load_part: Callable[[str], Any]) -> tuple[Path, Parts] | None:
    """The directory (under the manifest's tmp/, fsynced, for the caller to stamp and rename) holding the rows of the
    parted head `doc`, made from `source` (its campaign's previous head directory) where their parts are the same,
    and its parts; None when this cannot be done here (no parts.json, most parts new, a node whose copy would differ,
    the source gone meanwhile, a damaged part): the full refresh then."""
    if source is None or not is_parted(doc) or not isinstance(doc.get("node_parts"), list):
        return None
    old = read_parts(source)
    part_list = doc["node_parts"]
    if old is None or not part_list or not all(isinstance(part, str) for part in part_list):
        return None
    known = {part for part in part_list if part in old.at}
    if len(part_list) - sum(part in known for part in part_list) > MOST_NEW * len(part_list):
        return None
    head = head_fields(doc)
    work = segments.tmp_dir(manifest, "head")
    sink = None
    try:
        with segments.bounded(manifest, MEMORY) as con:
            con.execute("SET TimeZone = 'UTC'").fetchall()
            for macro in sqlflat.MACROS:
                con.execute(macro).fetchall()
            layout = Layout([], [], [])
            copyable = _copyable(con, source, old, known)
            sink = _Shifted(segments.tmp_dir(manifest, "rows"), layout)
            made = flatten(head, records, read_ahead, _nodes(doc, old, copyable, load_part, layout), None, sink)
            sink.close()
            _load_kept(con, source, layout, work)
            rows = Flattened({}, {}, TakenNodes(), made.ctx, source, made.sigs, sink.spilled)
            order = ["nodes", *(table for table in HISTORY_VIEW if table != "nodes")]
            segments.write_tables(con, rows, work, order, taken_loaded=True, shape=_results(work), by_sig=True)
            segments.write_tables(con, {"builds": []}, work, ["builds"])  # (a head's directory holds none)
        segments.fsync_tree(work)
    except BaseException as exc:
        if sink is not None:
            sink.remove()  # (written or not: its rows are read once)
        shutil.rmtree(work, ignore_errors=True)
        if isinstance(exc, duckdb.Error | OSError | StoreError):
            return None
        raise
    return work, layout.parts
