"""Every DuckDB connection claw opens. DuckDB draws a progress bar on stdout once a query has run 2 s, even into a
pipe or a file: a `claw query --output csv > rows.csv`, a report's JSON or a view's page built on a busy machine
would carry it among the rows. Each connection here is made without it."""

from __future__ import annotations

from typing import Any

import duckdb


def connect(database: str = ":memory:", **config: Any) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect(database, config=config)`, its progress bar off (a setting of the connection, not of `config`:
    DuckDB refuses it there)."""
    con = duckdb.connect(database, config=config)
    try:
        con.execute("SET enable_progress_bar = false").fetchall()
    except BaseException:
        con.close()
        raise
    return con
