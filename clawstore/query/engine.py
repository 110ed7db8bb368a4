"""Run user SQL over the manifest: `claw query`'s library half."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from clawstore.errors import StoreError, UsageError
from clawstore.errors import one_line as single_line
from clawstore.query import answers
from clawstore.query.manifest import check_duckdb_can_open, manifest_dir
from clawstore.query.objects import create_objects_view
from clawstore.query.schema import HISTORY_VIEW
from clawstore.query.segments import ManifestChanged
from clawstore.query.views import answer_ids_sql, connect, create_views, current_view_sql

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader

_RESULT = "__claw_result"
T = TypeVar("T")
_RETRIES = 4  # a compaction may delete files under a running query: retry with a fresh snapshot
_OBJECTS_RE = re.compile(r"\bobjects\b", re.IGNORECASE)
_PARAM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ERRNO_RE = re.compile(r'"errno":\s*"(\d+)"')  # (in the JSON of DuckDB's IO errors)
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


BATCH = 1024  # rows fetched from DuckDB at a time: what a streamed query holds in Python, whatever its row count
# What DuckDB computes ahead of the fetches: its default 10 MB put 3 M rows' csv at 87 or 110 MB max RSS from one run
# to the next (csv of 3 M rows, 6 runs: 70-71 MB each with 1 MB, 70 or 89 MB with the default; the wall the same).
STREAM_BUFFER = "1MB"


class QueryRows:
    """The last statement's rows, fetched BATCH at a time while the query runs (`claw query` writes each batch
    before it fetches the next, so its memory does not grow with the result). The first batch is fetched at once:
    a query that fails before its first rows fails before anything is written, and may still be run again."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, columns: list[str], types: list[str]):
        self._cursor, self.columns, self.types = cursor, columns, types
        self._first = cursor.fetchmany(BATCH)
        self.started = False  # (a batch handed out cannot be taken back: no retry after it)

    def batches(self) -> Iterator[list[tuple[Any, ...]]]:
        batch, self._first = self._first, []
        while batch:
            self.started = True
            yield batch
            batch = self._cursor.fetchmany(BATCH)


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


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> QueryRows:
    cur = con.execute(sql)
    desc = cur.description or []
    return QueryRows(cur, [d[0] for d in desc], [str(d[1]) for d in desc])


def _wrapped(text: str) -> str:
    """The last statement as a subquery: its columns named as a table would name them (a name said twice gets
    `_1`, as `CREATE TABLE AS` gave them), the newline ending a trailing comment."""
    return f"SELECT * FROM ({text}\n) AS {_RESULT}"


def _select_rows(con: duckdb.DuckDBPyConnection, text: str) -> QueryRows:
    """Stream the query's rows; types Python cannot hold without extra modules become text."""
    desc = con.execute(f"{_wrapped(text)} LIMIT 0").description or []  # (bound, not run)
    exprs = []
    for name, typ, *_ in desc:
        quoted = _quoted(name)
        text_type = str(typ)
        exprs.append(f"CAST({quoted} AS VARCHAR) AS {quoted}"
                     if "TIME ZONE" in text_type or text_type.startswith("INTERVAL") else quoted)
    rows = _rows(con, f"SELECT {', '.join(exprs) or '*'} FROM ({_wrapped(text)})")
    rows.types = [str(d[1]) for d in desc]
    return rows


def _last_statement(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[str, bool]:
    """Run every statement but the last; the last one's text, and whether it is a query its rows can be selected
    from (not a catalog statement)."""
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
    return text, last.type == duckdb.StatementType.SELECT and not _CATALOG_RE.match(text)


def _execute(con: duckdb.DuckDBPyConnection, sql: str) -> QueryRows:
    text, selectable = _last_statement(con, sql)
    if selectable:
        try:
            return _select_rows(con, text)
        except duckdb.ParserException:
            pass  # e.g. DESCRIBE forms a subquery cannot wrap
    return _rows(con, text)


def _export(con: duckdb.DuckDBPyConnection, sql: str, parquet_out: Path) -> int:
    """DuckDB writes the rows to `parquet_out` (a temp file beside, renamed into place) as the query runs; the
    number of rows it wrote."""
    text, selectable = _last_statement(con, sql)
    if not selectable:
        raise UsageError("--out needs the last statement to be a query (SELECT ...)")
    try:
        [(count, *_)] = con.execute(f"COPY ({_wrapped(text)}) TO '{_sql_path(parquet_out)}' (FORMAT parquet)")\
            .fetchall()
    except duckdb.ParserException:
        raise UsageError("--out needs the last statement to be a query (SELECT ...)") from None
    except duckdb.IOException as exc:  # the file --out names: said as the other formats say it, not DuckDB's JSON
        failed = _ERRNO_RE.search(str(exc))
        if failed is None or str(parquet_out) not in str(exc):
            raise
        raise UsageError(f"--out {single_line(str(parquet_out))}: {os.strerror(int(failed.group(1)))}") from None
    return int(count)


def _confine(con: duckdb.DuckDBPyConnection, writable: Path | None) -> None:
    """Turn the views into in-memory tables, then every file access off for good (no COPY TO, no read_csv, no ATTACH, no
    extension), so that SQL cannot read secrets or plant rows in the manifest. Only the export file the user named stays
    writable. Details: docs/query.md (Details by module)."""
    views = con.execute("SELECT database_name, view_name FROM duckdb_views() "
                        "WHERE NOT internal AND NOT temporary AND schema_name = 'main'").fetchall()
    for database, name in views:
        view = f"{_quoted(database)}.main.{_quoted(name)}"
        con.execute(f"CREATE TEMP TABLE {_quoted(name)} AS SELECT * FROM {view}").fetchall()
        con.execute(f"DROP VIEW {view}").fetchall()
    if writable is not None:
        con.execute("SET allowed_paths = [?]", [str(writable.absolute())]).fetchall()
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


def stream_query(store_root: Path, sql: str, consume: Callable[[QueryRows], T],
                 params: Mapping[str, str] | None = None,
                 store: StoreReader | Callable[[], StoreReader] | None = None, confined: bool = False) -> T:
    """Run `sql` (one or more statements) on a fresh in-memory DuckDB with the manifest's views and hand the last
    statement's rows to `consume` while the query runs; `params` become DuckDB variables, `store` feeds the `objects`
    view, `confined` reads results and no file (SQL someone else wrote). Raises UsageError with one line for any SQL
    error, also one met after `consume` was given rows (it is not run again then: what it wrote stands)."""
    def work(con: duckdb.DuckDBPyConnection, handed: list[QueryRows]) -> T:
        rows = _execute(con, sql)
        handed.append(rows)
        return consume(rows)

    return _with_views(store_root, sql, work, params, store, confined, None)


def export_parquet(store_root: Path, sql: str, out: Path, params: Mapping[str, str] | None = None,
                   store: StoreReader | Callable[[], StoreReader] | None = None, confined: bool = False) -> int:
    """Write the last statement's rows to the Parquet file `out` (stream_query's SQL and arguments); how many."""
    return _with_views(store_root, sql, lambda con, _: _export(con, sql, out), params, store, confined, out)


def run_query(store_root: Path, sql: str, params: Mapping[str, str] | None = None,
              store: StoreReader | Callable[[], StoreReader] | None = None, confined: bool = False) -> QueryResult:
    """stream_query's rows, all of them in memory (for results known to be small). Nothing leaves before the last
    row is read, so a manifest changed under the reading is looked at again however many rows were read."""
    def collect(con: duckdb.DuckDBPyConnection, _: list[QueryRows]) -> QueryResult:
        rows = _execute(con, sql)  # (not listed as handed out: a retry throws these away)
        return QueryResult(rows.columns, rows.types, [row for batch in rows.batches() for row in batch])

    return _with_views(store_root, sql, collect, params, store, confined, None)


@contextlib.contextmanager
def _interruptible(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Ctrl-C (or SIGTERM) stops the statement `con` runs. Python's handler runs only between bytecodes, and DuckDB
    looks at Python's signals itself only now and then: `claw query` of a long aggregate went on after Ctrl-C (a
    whole minute and more, until killed) or ended in a `RuntimeError: Query interrupted` traceback, exit 1 (before
    session 72). Here the signal's byte on Python's wakeup descriptor wakes a thread that interrupts the
    connection; the statement then fails with InterruptException. Only on the main thread, where Python's
    handlers run; elsewhere (a caller's thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # (not the main interpreter)
        os.close(read_end)
        os.close(write_end)
        yield
        return
    stopping = {signal.SIGINT.value, signal.SIGTERM.value}

    def watch() -> None:
        while data := os.read(read_end, 64):  # (b"": the statement is over, the write end closed)
            if stopping.intersection(data):
                con.interrupt()

    watcher = threading.Thread(target=watch, name="claw-query-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write_end)
        watcher.join()
        os.close(read_end)


def _with_views(store_root: Path, sql: str, work: Callable[[duckdb.DuckDBPyConnection, list[QueryRows]], T],
                params: Mapping[str, str] | None, store: StoreReader | Callable[[], StoreReader] | None,
                confined: bool, writable: Path | None) -> T:
    """`work` on a connection with the manifest's views, run again on a fresh one when the manifest changed under it,
    unless rows were handed out already (`work` lists the QueryRows it hands out in its second argument)."""
    for name in params or {}:
        if not _PARAM_RE.match(name):
            raise UsageError(f"--param {name!r}: a name is letters, digits and _")
    manifest = manifest_dir(store_root)
    check_duckdb_can_open(manifest)
    attempt = 0
    while True:
        attempt += 1
        con: duckdb.DuckDBPyConnection | None = None
        handed: list[QueryRows] = []
        try:
            con = connect(manifest)
            con.execute(f"SET streaming_buffer_size = '{STREAM_BUFFER}'").fetchall()
            if _refresh_answers(con, manifest, sql, store):
                create_views(con, manifest, replace=True)
            if _mentions(_OBJECTS_RE, sql) and store is not None:
                lister = store() if callable(store) else store
                create_objects_view(con, lister, manifest)
            for name, value in (params or {}).items():
                con.execute(f"SET VARIABLE \"{name}\" = ?", [value]).fetchall()
            if confined:
                _confine(con, writable)
            with _interruptible(con):
                return work(con, handed)
        except duckdb.InterruptException:
            raise KeyboardInterrupt from None  # (Ctrl-C or SIGTERM: `claw: interrupted`, exit 130)
        except RuntimeError as exc:  # DuckDB's own look at Python's signals: it took the KeyboardInterrupt
            if "interrupted" in str(exc).lower():
                raise KeyboardInterrupt from None
            raise
        except duckdb.Error as exc:
            retry = attempt < _RETRIES and not any(rows.started for rows in handed)
            if retry and _is_missing_manifest_file(exc, manifest):
                continue
            if retry and _is_read_error(exc) and answers.remove_damaged(manifest):
                continue  # a damaged answers file is made again, not trusted
            raise UsageError(f"query failed: {one_line(exc)}") from None
        except ManifestChanged as exc:
            if attempt < _RETRIES and not any(rows.started for rows in handed):
                continue
            raise UsageError(f"query failed: {exc} {_RETRIES} times in a row; run it again") from None
        finally:
            if con is not None:
                con.close()
