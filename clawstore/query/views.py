"""An in-memory DuckDB whose views read the manifest's Parquet files.

Nothing here writes: a user's DROP or ALTER only changes this connection's in-memory catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from clawstore.query.schema import HISTORY_VIEW, OBJECTS, PHYSICAL, Column
from clawstore.query.segments import Snapshot, latest_sql, snapshot


def _q(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _files(paths: Sequence[str]) -> str:
    return f"read_parquet([{', '.join(_q(p) for p in paths)}], union_by_name=true)"


def _project(cols: list[Column], source: str) -> str:
    """Fixed column order whatever the files' order (UNION BY NAME reorders)."""
    return f"SELECT {', '.join(chr(34) + c.name + chr(34) for c in cols)} FROM {source}"


def empty_select(cols: list[Column]) -> str:
    return "SELECT " + ", ".join(f'CAST(NULL AS {c.type}) AS "{c.name}"' for c in cols) + " WHERE false"


def history_sql(snap: Snapshot, table: str) -> str:
    files = snap.history_files(table)
    return _project(PHYSICAL[table], _files(files)) if files else empty_select(PHYSICAL[table])


def latest_view_sql(snap: Snapshot, table: str) -> str:
    """Latest row set per key. The pack's `_latest` file is already deduplicated, so with no waiting
    segments this is a plain scan; waiting segments (a few recent builds) are merged in at query time."""
    cols = PHYSICAL[table]
    pack = snap.latest_pack_file(table)
    segs = snap.segment_files(table)
    if not pack and not segs:
        return empty_select(cols)
    if not segs:
        return _project(cols, _files([pack]))  # type: ignore[list-item]
    if not pack:
        return _project(cols, f"({latest_sql(_files(segs))})")
    s, p = f"({_project(cols, _files(segs))})", f"({_project(cols, _files([pack]))})"
    # Pack rows whose key no waiting segment mentions pass straight through; the others compete by date.
    contested = f"(SELECT * FROM {s} UNION ALL SELECT * FROM {p} WHERE key IN (SELECT key FROM {s}))"
    return (f"SELECT * FROM {p} WHERE key NOT IN (SELECT key FROM {s}) UNION ALL "
            f"SELECT * FROM ({latest_sql(contested)})")


def create_views(con: duckdb.DuckDBPyConnection, manifest: Path) -> Snapshot:
    snap = snapshot(manifest)
    for table in PHYSICAL:
        if table in HISTORY_VIEW:
            con.execute(f"CREATE VIEW {HISTORY_VIEW[table]} AS {history_sql(snap, table)}").fetchall()
            con.execute(f"CREATE VIEW {table} AS {latest_view_sql(snap, table)}").fetchall()
        else:
            con.execute(f"CREATE VIEW {table} AS {history_sql(snap, table)}").fetchall()
    return snap


def create_objects_table(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, int, int]]) -> None:
    cols = ", ".join(f'"{c.name}" {c.type}' for c in OBJECTS)
    con.execute(f"CREATE TABLE objects ({cols})").fetchall()
    if rows:
        con.executemany("INSERT INTO objects VALUES (?, ?, ?)", rows)


def connect(manifest: Path) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory database with every manifest view (objects are added separately)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'").fetchall()
        create_views(con, manifest)
    except BaseException:
        con.close()
        raise
    return con
