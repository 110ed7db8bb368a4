"""An in-memory DuckDB whose views read the manifest's Parquet files (and the answers' DuckDB files,
attached read-only).

Nothing here writes: a user's DROP or ALTER only changes this connection's in-memory catalog.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from clawstore.query import answers, duck
from clawstore.query.heads import current_files, untrusted_files
from clawstore.query.schema import HISTORY_VIEW, JUDGEMENT_DIMENSIONS, MESSAGES, PHYSICAL, TRUST, Column
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


def create_views(con: duckdb.DuckDBPyConnection, manifest: Path, replace: bool = False) -> Snapshot:
    """Every view over the manifest (`replace`: again, once the answers caches changed)."""
    create = "CREATE OR REPLACE VIEW" if replace else "CREATE VIEW"
    snap = snapshot(manifest)
    for table in PHYSICAL:
        if table in HISTORY_VIEW:
            history, current = history_sql(snap, table), current_view_sql(manifest, table)
            if table in answers.CACHES:  # runs and judgements gain their answers (query/answers.py)
                history, current = (answers.joined(table, history, manifest),
                                    answers.current_sql(con, table, current, manifest))
            con.execute(f"{create} {HISTORY_VIEW[table]} AS {history}").fetchall()
            con.execute(f"{create} {table} AS {current}").fetchall()
        else:
            con.execute(f"{create} {table} AS {history_sql(snap, table)}").fetchall()
    for view, cols in (("messages", MESSAGES), ("judgement_dimensions", JUDGEMENT_DIMENSIONS)):
        sql = answers.list_view_sql(manifest, view, [c.name for c in cols], empty_select(cols))
        con.execute(f"{create} {view} AS {sql}").fetchall()
    return snap


def answer_ids_sql(manifest: Path, history: bool) -> dict[str, str]:
    """The ids whose answers the views can show ({cache: SQL selecting `id`}): of the current rows, and
    with `history` of every indexed build's."""
    snap = snapshot(manifest) if history else None
    ids = {}
    for table, (key, _) in answers.CACHES.items():
        ids[table] = f"SELECT {key} AS id FROM ({current_view_sql(manifest, table)})"
        if snap is not None:
            ids[table] += f" UNION ALL SELECT {key} AS id FROM ({history_sql(snap, table)})"
    return ids


def connect(manifest: Path) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory database with every manifest view (objects are added separately)."""
    con = duck.connect()
    try:
        con.execute("SET TimeZone = 'UTC'").fetchall()
        create_views(con, manifest)
        create_stats_macros(con)
    except BaseException:
        con.close()
        raise
    return con
