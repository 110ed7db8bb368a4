"""The answers themselves in SQL: each run's final answer and conversation, each judge call's summary and evidence, read
from the store when a query first asks for them, so that the manifest's segments stay small. The cache files:
docs/query.md (Details by module)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3
import duckdb

from clawstore.errors import ClawError
from clawstore.query import duck
from clawstore.query.jsonarray import write_array
from clawstore.query.sqltext import literal
from clawstore.values.bounds import MAX_TOOL_CALLS
from clawstore.values.urls import shown_text

if TYPE_CHECKING:
    from clawstore.store.face import ObjectReader


# What each cache file holds: its key column, then the columns the views read. A conversation and a
# judge's dimensions are lists of structs in one row, so each file is replaced whole, at once.
ITEM_FIELDS: dict[str, dict[str, str]] = {
    "messages": {"position": "INTEGER", "turn": "INTEGER", "kind": "VARCHAR", "role": "VARCHAR",
                 "content": "VARCHAR", "tool_call_id": "VARCHAR", "tool_name": "VARCHAR",
                 "tool_arguments": "VARCHAR", "tool_status": "VARCHAR", "tool_result": "VARCHAR"},
    "dimensions": {"dimension": "VARCHAR", "score": "DOUBLE", "evidence": "VARCHAR"},
}


def _list_of(field: str) -> str:
    return "STRUCT(" + ", ".join(f"{name} {kind}" for name, kind in ITEM_FIELDS[field].items()) + ")[]"


CACHES: dict[str, tuple[str, dict[str, str]]] = {
    "runs": ("artifact_id", {"artifact_id": "VARCHAR", "final_response": "VARCHAR", "turns": "INTEGER",
                             "tool_calls": "INTEGER", "messages": _list_of("messages")}),
    "judgements": ("record_id", {"record_id": "VARCHAR", "summary": "VARCHAR", "dimensions": _list_of("dimensions")}),
}
# The views of one row per list item: {view: (the cache and view it joins, its list column, renames)}.
LIST_VIEWS = {"messages": ("runs", "messages", {"run_key": "key"}),
              "judgement_dimensions": ("judgements", "dimensions", {})}
# The columns each view gains (also in query/schema.py, with their meaning).
ADDED = {"runs": ("final_response", "turns", "tool_calls"), "judgements": ("summary",)}
# SQL that names one of these reads answers: the caches are brought up to date before it runs.
_READS = {"runs": re.compile(r"\b(runs|run_history|messages)\b", re.IGNORECASE),
          "judgements": re.compile(r"\b(judgements|judgement_history|judgement_dimensions)\b", re.IGNORECASE)}


# 2: an OpenClaw run's turns and tool_calls NULL (1 cached them as 0); 3: a runner event's URL masked; 4: an OpenClaw
# run's tool_calls as its turns reported them (session 78)
CACHE_VERSION = 4


def cache_path(manifest: Path, table: str) -> Path:
    return manifest / "answers" / f"{table}.v{CACHE_VERSION}.parquet"


def wanted(sql: str, catalog: bool) -> list[str]:
    """The caches `sql` reads (every one for a statement listing the catalog)."""
    return [table for table, pattern in _READS.items() if catalog or pattern.search(sql)]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def run_answer(artifact_id: str, artifact: Any) -> dict[str, Any]:
    """The run's final answer (its last non-blank final_output; None when there is none), its turns (model
    replies), tool calls and conversation (the trace's messages, tool calls and tool results; the `tool`
    message echoing each result and the final_output echoing the last reply are left out)."""
    events = [e for e in (_dict(artifact).get("trace") or []) if isinstance(e, Mapping)]
    final = None
    for event in events:
        content = event.get("content")
        if event.get("event_type") == "final_output" and isinstance(content, str) and content.strip():
            final = content
    messages: list[dict[str, Any]] = []
    turn = calls = 0
    tool_names: dict[Any, Any] = {}
    for event in events:
        kind = event.get("event_type")
        row: dict[str, Any] = {"position": len(messages), "kind": kind, "role": None, "content": None,
                               "tool_call_id": None, "tool_name": None, "tool_arguments": None,
                               "tool_status": None, "tool_result": None}
        if kind == "message":
            if event.get("role") == "tool":
                continue
            if event.get("role") == "assistant":
                turn += 1
            row.update(role=_text(event.get("role")), content=_text(event.get("content")))
        elif kind == "tool_call":
            calls += 1
            args = event.get("parsed_arguments")
            tool_names[event.get("call_id")] = event.get("tool_name")
            row.update(role="assistant", tool_call_id=_text(event.get("call_id")),
                       tool_name=_text(event.get("tool_name")),
                       tool_arguments=_text(args if args is not None else event.get("raw_arguments")))
        elif kind == "tool_result":
            name = _dict(event.get("metadata")).get("tool_name") or tool_names.get(event.get("call_id"))
            row.update(role="tool", tool_call_id=_text(event.get("call_id")), tool_name=_text(name),
                       tool_status=_text(event.get("status")), tool_result=_text(event.get("output")))
        elif kind == "runner":  # (claw's words: a failed request's name its URL, with a password stored before 62)
            detail = _text(event.get("detail"))
            row.update(content=shown_text(detail) if detail is not None else None, tool_name=_text(event.get("name")))
        else:
            continue
        row["turn"] = turn
        messages.append(row)
    if _dict(_dict(artifact).get("identity")).get("runner_type") == "openclaw":
        # OpenClaw runs its agent loop in its container: the trace holds none of its replies or tool calls; the count
        # its turns reported (`meta.toolSummary.calls`, summed by the runner since session 78) is in its metadata.
        return {"artifact_id": artifact_id, "final_response": final, "turns": None,
                "tool_calls": _openclaw_tool_calls(artifact), "messages": messages}
    return {"artifact_id": artifact_id, "final_response": final, "turns": turn, "tool_calls": calls,
            "messages": messages}


def _openclaw_tool_calls(artifact: Any) -> int | None:
    """The tool calls an OpenClaw run's turns reported: the runner's sum (since session 78); of a run recorded before,
    with one turn started, that turn's own count (its observable summary is the last turn's); else unknown."""
    oc = _dict(_dict(_dict(_dict(artifact).get("runner_metadata")).get("openclaw")).get("metadata"))
    if "tool_calls" in oc:
        calls = oc["tool_calls"]
    else:
        steps = [i for i in oc.get("invocations") or [] if str(_dict(i).get("step", "")).startswith("turn")]
        summary = _dict(_dict(oc.get("observable_summary")).get("tool_summary"))
        calls = summary.get("calls") if len(steps) == 1 else None
    return calls if type(calls) is int and 0 <= calls <= MAX_TOOL_CALLS else None


def judgement_answer(record_id: str, record: Any, load: Callable[[str], Any]) -> dict[str, Any] | None:
    """The judge's summary and, per dimension (and `overall`), its score and evidence (one item a line);
    None when the judgement body is not in the store."""
    summary = _dict(_dict(record).get("summary"))
    body_id = _dict(_dict(record).get("outputs")).get("judgement")
    scores: Mapping[str, Any] = {}
    if isinstance(body_id, str):
        body = load(body_id)
        if body is None:
            return None
        scores = _dict(_dict(body).get("scores"))
    dims = _dict(scores.get("dimensions")) or _dict(summary.get("dimensions"))
    evidence = _dict(scores.get("evidence"))

    def lines(items: Any) -> str | None:
        return "\n".join(str(e) for e in items) if isinstance(items, list) and items else None

    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    rows = [{"dimension": str(name), "score": number(score), "evidence": lines(evidence.get(name))}
            for name, score in dims.items()]
    overall = scores.get("overall_score", summary.get("overall_score"))
    if overall is not None or scores.get("overall_evidence"):
        rows.append({"dimension": "overall", "score": number(overall),
                     "evidence": lines(scores.get("overall_evidence"))})
    return {"record_id": record_id, "summary": _text(scores.get("summary")), "dimensions": rows}


def _loader(store: ObjectReader) -> Callable[[str], Any]:
    def load(oid: str) -> Any:
        try:
            return store.get_json(oid)
        except (ClawError, ValueError):
            return None  # gc'd, or damaged (fsck names it): left out, so NULL, and read again next time
    return load


def refresh(con: duckdb.DuckDBPyConnection, manifest: Path, tables: Iterable[str], ids_sql: Mapping[str, str],
            store: ObjectReader | Callable[[], ObjectReader]) -> int:
    """Add to each cache in `tables` the rows of the ids `ids_sql[table]` selects that it lacks, read from
    the store. Returns how many objects were read (0: every cache was up to date, nothing written)."""
    read = 0
    opened: ObjectReader | None = None
    for table in tables:
        key, _ = CACHES[table]
        cache = cache_path(manifest, table)
        have = f"SELECT {key} FROM read_parquet({literal(str(cache))})" if cache.exists() else None
        missing_sql = f"SELECT DISTINCT id FROM ({ids_sql[table]}) WHERE id IS NOT NULL"
        if have:
            missing_sql += f" AND id NOT IN ({have})"
        missing = [row[0] for row in con.execute(missing_sql).fetchall()]
        if not missing:
            continue
        if opened is None:
            opened = store() if callable(store) else store
        _rewrite(con, cache, table, _rows(table, missing, _loader(opened)), have is not None)
        read += len(missing)
    return read


def _rows(table: str, ids: list[str], load: Callable[[str], Any]) -> Iterable[dict[str, Any]]:
    for oid in ids:
        found = load(oid)
        if found is None:
            continue
        row = run_answer(oid, found) if table == "runs" else judgement_answer(oid, found, load)
        if row is not None:
            yield row


def _rewrite(con: duckdb.DuckDBPyConnection, cache: Path, table: str, rows: Iterable[dict[str, Any]],
             old: bool) -> None:
    """The cache's rows and `rows`, written to a new file that replaces it (concurrent queries may both
    rewrite it: each file is complete)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    _, columns = CACHES[table]
    fd, name = tempfile.mkstemp(prefix=f"{table}.", suffix=".json", dir=cache.parent)
    os.close(fd)
    fresh = Path(name)
    out = cache.with_name(f"{table}.{os.getpid()}.{time.time_ns()}.tmp")
    try:
        write_array(fresh, rows)
        spec = "{" + ", ".join(f"'{n}': '{t}'" for n, t in columns.items()) + "}"
        select = f"SELECT * FROM read_json({literal(str(fresh))}, format='array', columns={spec})"
        if old:
            select += f" UNION ALL SELECT * FROM read_parquet({literal(str(cache))})"
        # Row groups of a few thousand rows: a search of 10,000 answers scans them on every core.
        con.execute(f"COPY ({select}) TO {literal(str(out))} (FORMAT parquet, ROW_GROUP_SIZE 4096)").fetchall()
        os.replace(out, cache)
        for version in range(1, CACHE_VERSION):  # the versions before: every answer read so far, read by nothing now
            cache.with_name(f"{table}.v{version}.parquet" if version > 1 else f"{table}.parquet").unlink(
                missing_ok=True)
    finally:
        fresh.unlink(missing_ok=True)
        out.unlink(missing_ok=True)


def joined(table: str, base_sql: str, manifest: Path) -> str:
    """`base_sql` (the rows of runs or judgements, or their history) with the columns ADDED[table]."""
    key, columns = CACHES[table]
    cache = cache_path(manifest, table)
    if not cache.exists():
        nulls = ", ".join(f"CAST(NULL AS {columns[c]}) AS {c}" for c in ADDED[table])
        return f"SELECT base.*, {nulls} FROM ({base_sql}) base"
    picked = ", ".join(f"answer.{c}" for c in ADDED[table])
    return (f"SELECT base.*, {picked} FROM ({base_sql}) base LEFT JOIN read_parquet({literal(str(cache))}) answer "
            f"ON answer.{key} = base.{key}")


def _current_file(manifest: Path, table: str, joined_sql: str) -> Path | None:
    """Where the rows `joined_sql` selects are materialised, named for what they are made from: that SQL
    (the heads' files, immutable, and the columns), the cache file as it is now (a rewritten cache is a
    new file: another inode and time) and the DuckDB that writes it. None when there is no cache yet."""
    cache = cache_path(manifest, table)
    try:
        made = cache.stat()
    except FileNotFoundError:
        return None
    source = json.dumps([joined_sql, made.st_ino, made.st_mtime_ns, made.st_size, duckdb.__version__])
    return cache.with_name(f"{table}.current.{blake3.blake3(source.encode()).hexdigest()[:32]}.duckdb")


def current_sql(con: duckdb.DuckDBPyConnection, table: str, base_sql: str, manifest: Path) -> str:
    """The plain view `table`: the table of its materialised file, attached read-only as `claw_<table>`,
    when one was made from these rows and this cache; else `base_sql` joined with the cache."""
    sql = joined(table, base_sql, manifest)
    made = _current_file(manifest, table, sql)
    con.execute(f"DETACH DATABASE IF EXISTS claw_{table}").fetchall()
    if made is None or not made.exists():
        return sql
    con.execute(f"ATTACH {literal(str(made))} AS claw_{table} (READ_ONLY)").fetchall()
    return f"SELECT * FROM claw_{table}.{table}"


def materialise(con: duckdb.DuckDBPyConnection, manifest: Path, table: str, base_sql: str) -> bool:
    """Write the current rows `base_sql` selects, joined with their answers, as the table `table` of their
    own DuckDB file unless it is there; remove the files made from older inputs. True when written."""
    sql = joined(table, base_sql, manifest)
    made = _current_file(manifest, table, sql)
    if made is None or made.exists():
        return False
    work = manifest / "tmp" / f"answers.{os.getpid()}.{time.time_ns()}"  # (tmp/: never read, cleaned)
    work.mkdir(parents=True)
    try:
        con.execute(f"ATTACH {literal(str(work / made.name))} AS claw_new").fetchall()
        try:
            con.execute(f"CREATE TABLE claw_new.{table} AS {sql}").fetchall()
            con.execute("CHECKPOINT claw_new").fetchall()
        finally:
            con.execute("DETACH claw_new").fetchall()
        if _current_file(manifest, table, sql) != made:
            return False  # the cache was rewritten meanwhile: the file may hold rows of the newer one
        os.replace(work / made.name, made)  # concurrent queries may both write it: each file is whole
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in made.parent.glob(f"{table}.current.*.duckdb"):
        if old != made:
            old.unlink(missing_ok=True)  # a query reading it keeps its open file; one about to retries
    return True


def remove_damaged(manifest: Path) -> bool:
    """Remove the files of `<manifest>/answers/` DuckDB cannot read whole (they are derived: the next
    query makes them again from the store). True when one was removed."""
    removed = False
    con = duck.connect()
    try:
        for path in sorted(cache_path(manifest, "runs").parent.glob("*.*")):
            read = f"read_parquet({literal(str(path))})"
            try:
                if path.suffix == ".duckdb":
                    con.execute(f"ATTACH {literal(str(path))} AS checked (READ_ONLY)").fetchall()
                    read = "checked." + path.name.split(".")[0]
                elif path.suffix != ".parquet":
                    continue
                con.execute(f"SELECT bit_xor(hash(t)) FROM {read} t").fetchall()
            except duckdb.Error:
                path.unlink(missing_ok=True)
                removed = True
            finally:
                con.execute("DETACH DATABASE IF EXISTS checked").fetchall()
    finally:
        con.close()
    return removed


def list_view_sql(manifest: Path, view: str, columns: list[str], empty: str) -> str:
    """One row per item of a cached list (a run's messages, a judge call's dimensions) joined with the
    current rows it belongs to: `columns` in order, each from the item or else from the row."""
    table, field, renamed = LIST_VIEWS[view]
    key, _ = CACHES[table]
    cache = cache_path(manifest, table)
    if not cache.exists():
        return empty
    names = ITEM_FIELDS[field]
    picked = ", ".join(f"item.{c}" if c in names else f"base.{renamed.get(c, c)} AS {c}" for c in columns)
    return (f"SELECT {picked} FROM {table} base JOIN (SELECT {key} AS item_key, unnest({field}, recursive := true) "
            f"FROM read_parquet({literal(str(cache))})) item ON item.item_key = base.{key}")
