"""Run user SQL over the manifest: `claw query`'s library half."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from clawstore.errors import StoreError, UsageError
from clawstore.query import answers
from clawstore.query.manifest import check_duckdb_can_open, manifest_dir
from clawstore.query.objects import create_objects_view
from clawstore.query.schema import HISTORY_VIEW
from clawstore.query.segments import ManifestChanged
from clawstore.query.views import answer_ids_sql, connect, create_views, current_view_sql

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader

_RESULT = "__claw_result"
_RETRIES = 4  # a compaction may delete files under a running query: retry with a fresh snapshot
_OBJECTS_RE = re.compile(r"\bobjects\b", re.IGNORECASE)
_PARAM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Statements about the catalog itself: run as they are (materialising them would list the result
# table among the tables), with every view present, `objects` included.
_CATALOG_RE = re.compile(r"^\s*(show|describe|summarize)\b", re.IGNORECASE)
# The history views hold every build: the builds finished since the last query are indexed for them
# (a copy of the campaign per build), while the plain views need only the campaigns' current heads.
_HISTORY_RE = re.compile(r"\b(" + "|".join([*HISTORY_VIEW.values(), "builds"]) + r")\b", re.IGNORECASE)


def _mentions(pattern: re.Pattern[str], sql: str) -> bool:
    """Does the SQL name a view `pattern` matches, or list the catalog (every view present)?"""
    return bool(pattern.search(sql)) or any(_CATALOG_RE.match(statement) for statement in sql.split(";"))


def reads_history(sql: str) -> bool:
    """Does this SQL read a history view (or the catalog), so that every finished build is indexed first?"""
    return _mentions(_HISTORY_RE, sql)


@dataclass
class QueryResult:
    columns: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def one_line(exc: BaseException) -> str:
    """DuckDB errors span several lines (LINE 1: ... ^); keep the first non-empty one."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _is_missing_manifest_file(exc: duckdb.Error, manifest: Path) -> bool:
    """A manifest file vanished under us (a compaction replaced it), not a user path that is wrong."""
    text = str(exc)
    return (isinstance(exc, duckdb.IOException) and str(manifest) in text
            and ("No such file" in text or "No files found" in text or "database does not exist" in text))


def _is_read_error(exc: duckdb.Error) -> bool:
    """A file could not be read (not an error in the SQL's text): how DuckDB reports a damaged Parquet or
    database file."""
    return isinstance(exc, duckdb.IOException | duckdb.InvalidInputException) or type(exc) in (
        duckdb.Error, duckdb.InternalException)


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> QueryResult:
    cur = con.execute(sql)
    rows = cur.fetchall()
    desc = cur.description or []
    return QueryResult([d[0] for d in desc], [str(d[1]) for d in desc], rows)


def _fetch_table(con: duckdb.DuckDBPyConnection) -> QueryResult:
    """Read the materialised result; types Python cannot hold without extra modules become text."""
    desc = con.execute(f"SELECT * FROM {_RESULT} LIMIT 0").description or []
    exprs = []
    for name, typ, *_ in desc:
        quoted = _quoted(name)
        text = str(typ)
        exprs.append(f"CAST({quoted} AS VARCHAR) AS {quoted}"
                     if "TIME ZONE" in text or text.startswith("INTERVAL") else quoted)
    result = _fetch(con, f"SELECT {', '.join(exprs) or '*'} FROM {_RESULT}")
    result.types = [str(d[1]) for d in desc]
    return result


def _execute(con: duckdb.DuckDBPyConnection, sql: str, parquet_out: Path | None) -> QueryResult:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise UsageError(f"query failed: {one_line(exc)}") from None
    if not statements:
        raise UsageError("query failed: no SQL statement given")
    for statement in statements[:-1]:
        con.execute(statement.query).fetchall()
    last = statements[-1]
    text = last.query.strip().rstrip(";").rstrip()
    if last.type == duckdb.StatementType.SELECT and not _CATALOG_RE.match(text):
        try:
            # Materialise once: the rows feed both printing and export with the statement run once.
            con.execute(f"CREATE TEMP TABLE {_RESULT} AS {text}\n").fetchall()
            materialised = True
        except duckdb.ParserException:
            materialised = False  # e.g. DESCRIBE forms CTAS cannot wrap
        if materialised:
            if parquet_out is not None:
                con.execute(f"COPY {_RESULT} TO '{_sql_path(parquet_out)}' (FORMAT parquet)").fetchall()
            return _fetch_table(con)
    if parquet_out is not None:
        raise UsageError("--out needs the last statement to be a query (SELECT ...)")
    return _fetch(con, text)


def _confine(con: duckdb.DuckDBPyConnection, parquet_out: Path | None) -> None:
    """Turn the views into in-memory tables, then every file access off for good (no COPY TO, no read_csv, no ATTACH, no
    extension), so that SQL cannot read secrets or plant rows in the manifest. Only the export file the user named stays
    writable. Details: docs/query.md (Details by module)."""
    views = con.execute("SELECT database_name, view_name FROM duckdb_views() "
                        "WHERE NOT internal AND NOT temporary AND schema_name = 'main'").fetchall()
    for database, name in views:
        view = f"{_quoted(database)}.main.{_quoted(name)}"
        con.execute(f"CREATE TEMP TABLE {_quoted(name)} AS SELECT * FROM {view}").fetchall()
        con.execute(f"DROP VIEW {view}").fetchall()
    if parquet_out is not None:
        con.execute("SET allowed_paths = [?]", [str(parquet_out.absolute())]).fetchall()
    for setting in ("enable_external_access", "autoinstall_known_extensions", "autoload_known_extensions"):
        con.execute(f"SET {setting} = false").fetchall()
    con.execute("SET lock_configuration = true").fetchall()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _refresh_answers(con: duckdb.DuckDBPyConnection, manifest: Path, sql: str,
                     store: StoreReader | Callable[[], StoreReader] | None) -> bool:
    """Bring the answer caches the SQL reads up to date (query/answers.py): what is new is read from the
    store, and the current rows joined with their answers are materialised once. True when a file changed
    (the views then read the new one)."""
    catalog = any(_CATALOG_RE.match(statement) for statement in sql.split(";"))
    tables = answers.wanted(sql, catalog)
    if not tables or store is None:
        return False
    try:
        read = answers.refresh(con, manifest, tables, answer_ids_sql(manifest, reads_history(sql)), store)
    except OSError as exc:
        raise StoreError(f"cannot write the answers cache under {manifest}: {exc.strerror}") from None
    made = False
    for table in tables:
        try:
            made |= answers.materialise(con, manifest, table, current_view_sql(manifest, table))
        except OSError:
            pass  # (a store we may not write: the views join the cache instead)
    return read > 0 or made


def run_query(store_root: Path, sql: str, params: Mapping[str, str] | None = None,
              store: StoreReader | Callable[[], StoreReader] | None = None,
              parquet_out: Path | None = None, confined: bool = False) -> QueryResult:
    """Run `sql` (one or more statements) on a fresh in-memory DuckDB with the manifest's views; `params` become DuckDB
    variables, `store` feeds the `objects` view, `confined` reads results and no file (SQL someone else wrote). Raises
    UsageError with one line for any SQL error."""
    for name in params or {}:
        if not _PARAM_RE.match(name):
            raise UsageError(f"--param {name!r}: a name is letters, digits and _")
    manifest = manifest_dir(store_root)
    check_duckdb_can_open(manifest)
    attempt = 0
    while True:
        attempt += 1
        con: duckdb.DuckDBPyConnection | None = None
        try:
            con = connect(manifest)
            if _refresh_answers(con, manifest, sql, store):
                create_views(con, manifest, replace=True)
            if _mentions(_OBJECTS_RE, sql) and store is not None:
                lister = store() if callable(store) else store
                create_objects_view(con, lister, manifest)
            for name, value in (params or {}).items():
                con.execute(f"SET VARIABLE \"{name}\" = ?", [value]).fetchall()
            if confined:
                _confine(con, parquet_out)
            return _execute(con, sql, parquet_out)
        except duckdb.Error as exc:
            if _is_missing_manifest_file(exc, manifest) and attempt < _RETRIES:
                continue
            if _is_read_error(exc) and attempt < _RETRIES and answers.remove_damaged(manifest):
                continue  # a damaged answers file is made again, not trusted
            raise UsageError(f"query failed: {one_line(exc)}") from None
        except ManifestChanged as exc:
            if attempt < _RETRIES:
                continue
            raise UsageError(f"query failed: {exc} {_RETRIES} times in a row; run it again") from None
        finally:
            if con is not None:
                con.close()
