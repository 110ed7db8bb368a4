"""Rows a build shares with an earlier segment or head, copied by DuckDB instead of flattened again, so that indexing a
build costs what it changed. How rows are matched and the figures: docs/query.md (Details by module)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb

from clawstore.query import duck
from clawstore.query.jsonarray import write_array
from clawstore.query.packed import SCORED, FactTable, Taken
from clawstore.query.rows import Reusable, Row, RowMeta
from clawstore.query.schema import HISTORY_VIEW, Column, duckdb_columns
from clawstore.query.sqltext import literal
from clawstore.store.core.ids import PREFIX

SIG, RUN_KEY = "_claw_node_sig", "_claw_run_key"
HIDDEN: dict[str, list[Column]] = {
    table: [Column(SIG, "BIGINT", "rows.node_sig of the row's node (null: its record was not read)")]
    + ([Column(RUN_KEY, "VARCHAR", "its record's run_key")] if table == "nodes" else [])
    for table in HISTORY_VIEW
}
# Where a row stands in its build (node position, then its place among that node's rows): the writer
# orders by them, so a segment with copied rows lists them exactly as a flattened one would.
ORDER = [Column("_claw_pos", "BIGINT", "node position"), Column("_claw_sub", "BIGINT", "row within the node")]
_TAKEN = "claw_taken"
FACTS_AT_ONCE = 8192  # rows of a source's nodes fetched at once by `reusable`
TAKEN_AT_ONCE = 1024  # taken nodes written at once by `load_taken`


def reusable(source: Path) -> Reusable | None:
    """The nodes whose rows `source` (a segment or head directory) holds exactly once, or None when it
    holds none that can be copied: gone meanwhile, or written by a claw without the hidden columns."""
    facts = FactTable()
    con = duck.connect(threads=1)  # (its sort's high-water mark: 191 MB over the process's at 10,000 x 5, 169 so)
    try:
        # Only what flatten reads of each kind (a run's key, status and latency; an evaluation's run_key), in the
        # order of record digest and signature for FactTable to pack as they come, FACTS_AT_ONCE rows at a time; an
        # object id as its digest's bytes alone, another id as it is (FactTable holds it beside).
        digest = (f"CASE WHEN regexp_full_match(record_id, '{PREFIX}[0-9a-f]{{64}}') "
                  f"THEN unhex(record_id[{len(PREFIX) + 1}:]) END")
        cursor = con.execute(
            f"SELECT d, CASE WHEN d IS NULL THEN record_id END, {SIG}, * EXCLUDE (d, record_id, {SIG}) FROM ("
            f"SELECT {digest} AS d, record_id, {SIG}, kind, "
            f"CASE WHEN kind = 'run' THEN key WHEN kind IN ('checks', 'judge', 'result') THEN {RUN_KEY} END, "
            f"CASE WHEN kind = 'run' THEN status END, CASE WHEN kind = 'run' THEN latency_s::DOUBLE END, "
            f"cost_usd::DOUBLE "
            f"FROM read_parquet({literal(str(source / 'nodes.parquet'))}) "
            f"WHERE record_id IS NOT NULL AND {SIG} IS NOT NULL "
            f"QUALIFY count(*) OVER (PARTITION BY record_id, {SIG}) = 1) ORDER BY d NULLS LAST, {SIG}")
        while batch := cursor.fetchmany(FACTS_AT_ONCE):
            facts.extend(batch)
    except duckdb.Error:
        return None
    finally:
        con.close()
    return Reusable(source, facts.seal()) if facts else None


def hidden_values(table: str, meta: RowMeta, sub: int) -> Row:
    """The hidden and ordering columns of one flattened row."""
    values: Row = {SIG: meta.sig, "_claw_pos": meta.position, "_claw_sub": sub}
    if table == "nodes":
        values[RUN_KEY] = meta.run_key
    return values


def load_taken(con: duckdb.DuckDBPyConnection, taken: Iterable[Taken], work: Path) -> None:
    """The taken nodes as a temporary table of `con`, for `copied_sql` to join the source's rows with."""
    path = work / f"{_TAKEN}.json"
    write_array(path, ({"position": node.position, "record_id": node.record_id, "sig": node.sig,
                        "action": node.action, **(node.scored or {})} for node in taken), TAKEN_AT_ONCE)
    types = duckdb_columns("results")
    columns = {"position": "BIGINT", "record_id": "VARCHAR", "sig": "BIGINT", "action": "VARCHAR",
               **{name: types[name] for name in SCORED}}
    struct = "{" + ", ".join(f"'{name}': '{typ}'" for name, typ in columns.items()) + "}"
    con.execute(f"CREATE TEMP TABLE {_TAKEN} AS SELECT * FROM read_json({literal(str(path))}, "
                f"format='array', columns={struct})").fetchall()
    path.unlink()


def copied_sql(table: str, source: Path, ctx: Mapping[str, Any], by_sig: bool = False) -> str:
    """The rows of `table` the taken nodes have in `source`, with this build's columns and order. `by_sig`: the taken
    table holds only each node's position, signature and action, the signature alone naming its node in `source` (a
    result's scored columns are left as they were, for the caller to make: parted.py)."""
    types = duckdb_columns(table)
    replace = [f'CAST({literal(value)} AS {types[name]}) AS "{name}"' for name, value in ctx.items()]
    replace.append('t.action AS "action"')
    if table == "results" and not by_sig:
        replace.extend(f't."{name}" AS "{name}"' for name in SCORED)
    on = f"s.{SIG} = t.sig" if by_sig else f"s.record_id = t.record_id AND s.{SIG} = t.sig"
    return (f"SELECT s.* REPLACE ({', '.join(replace)}), t.position AS _claw_pos, s.file_row_number AS _claw_sub "
            f"FROM read_parquet({literal(str(source / f'{table}.parquet'))}, file_row_number=true) AS s "
            f"JOIN {_TAKEN} AS t ON {on}")
