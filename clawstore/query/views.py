"""An in-memory DuckDB whose views read the manifest's Parquet files.

Nothing here writes: a user's DROP or ALTER only changes this connection's in-memory catalog.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from clawstore.query.heads import current_files, untrusted_files
from clawstore.query.schema import HISTORY_VIEW, PHYSICAL, TRUST, Column
from clawstore.query.segments import Snapshot, files_sql, project, snapshot
from clawstore.query.sqltext import literal
from clawstore.query.stats_sql import create_stats_macros


def empty_select(cols: list[Column]) -> str:
    return "SELECT " + ", ".join(f'CAST(NULL AS {c.type}) AS "{c.name}"' for c in cols) + " WHERE false"


def history_sql(snap: Snapshot, table: str) -> str:
    files = snap.history_files(table)
    return project(table, files_sql(files)) if files else empty_select(PHYSICAL[table])


def current_view_sql(manifest: Path, table: str) -> str:
    """Every campaign as it stands: the rows of each current campaign head (what `claw report` shows),
    then those of heads kept apart as untrusted, marked by the TRUST columns."""
    def marked(files: list[str], trusted: str, signer: str) -> str:
        return f"SELECT *, {trusted} AS trusted, {signer} AS signer FROM ({project(table, files_sql(files))})"

    parts = []
    files = current_files(manifest, table)
    if files:
        parts.append(marked(files, "true", "CAST(NULL AS VARCHAR)"))
    for signer, kept in untrusted_files(manifest, table).items():
        parts.append(marked(kept, "false", literal(signer)))
    return " UNION ALL ".join(parts) if parts else empty_select(PHYSICAL[table] + TRUST)


def create_views(con: duckdb.DuckDBPyConnection, manifest: Path) -> Snapshot:
    snap = snapshot(manifest)
    for table in PHYSICAL:
        if table in HISTORY_VIEW:
            con.execute(f"CREATE VIEW {HISTORY_VIEW[table]} AS {history_sql(snap, table)}").fetchall()
            con.execute(f"CREATE VIEW {table} AS {current_view_sql(manifest, table)}").fetchall()
        else:
            con.execute(f"CREATE VIEW {table} AS {history_sql(snap, table)}").fetchall()
    return snap


def connect(manifest: Path) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory database with every manifest view (objects are added separately)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'").fetchall()
        create_views(con, manifest)
        create_stats_macros(con)
    except BaseException:
        con.close()
        raise
    return con
