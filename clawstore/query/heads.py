"""The rows of every campaign as it stands: its head's nodes, materialised once per head object under
`<store>/manifest/heads/`. Layout and reuse rules: docs/query.md (Details by module)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import duckdb
import msgspec

from clawstore.errors import MissingObjectError, StoreError
from clawstore.host.durable import write_file_atomic
from clawstore.query import copied, duck, parted, segments, sqlflat
from clawstore.query import rows as rows_module
from clawstore.query.rows import (
    Flattened,
    Reusable,
    Row,
    build_context,
    build_nodes,
    flatten,
    node_sig,
    same_rows,
    without_planning_views,
)
from clawstore.query.schema import HISTORY_VIEW, PHYSICAL
from clawstore.query.spill import Spill
from clawstore.store.documents import metrics_problem
from clawstore.store.face import ObjectReader, StoreReader
from clawstore.store.headdoc import head_fields, is_parted, iter_parts
from clawstore.values import jsontext

CAMPAIGN_REFS = "campaigns/"
Warn = Callable[[str], None]
T = TypeVar("T")


def heads_dir(manifest: Path) -> Path:
    return manifest / "heads"


def _hex(oid: str) -> str:
    return oid.split(":", 1)[-1]


def _read_current_doc(manifest: Path) -> dict[str, Any]:
    try:
        data = json.loads((heads_dir(manifest) / "current.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_current(manifest: Path) -> dict[str, str]:
    """{campaign_id: head hex} as last published (empty when no query has indexed heads yet)."""
    campaigns = _read_current_doc(manifest).get("campaigns")
    return {str(k): str(v) for k, v in campaigns.items()} if isinstance(campaigns, dict) else {}


def read_untrusted(manifest: Path) -> dict[str, tuple[str, str]]:
    """{campaign_id: (head hex, signer)} of the heads kept apart as untrusted, as last published."""
    found = _read_current_doc(manifest).get("untrusted")
    heads = {}
    for campaign, entry in (found.items() if isinstance(found, dict) else ()):
        if isinstance(entry, dict) and isinstance(entry.get("head"), str):
            heads[str(campaign)] = (entry["head"], str(entry.get("signer")))
    return heads


def current_files(manifest: Path, table: str) -> list[str]:
    """The Parquet files of `table` for every current campaign head."""
    root = heads_dir(manifest)
    return [str(root / hexid / f"{table}.parquet") for hexid in sorted(set(read_current(manifest).values()))]


def untrusted_files(manifest: Path, table: str) -> dict[str, list[str]]:
    """{signer: the Parquet files of `table` of the heads kept apart as signed by it}."""
    root = heads_dir(manifest)
    by_signer: dict[str, set[str]] = {}
    for hexid, signer in read_untrusted(manifest).values():
        by_signer.setdefault(signer, set()).add(str(root / hexid / f"{table}.parquet"))
    return {signer: sorted(files) for signer, files in sorted(by_signer.items())}


def wanted_heads(store: StoreReader) -> dict[str, str]:
    """{campaign_id: head object id} from the campaign refs right now."""
    return {name[len(CAMPAIGN_REFS):]: oid for name, oid in store.list_refs(CAMPAIGN_REFS).items()}


def wanted_untrusted(store: StoreReader) -> dict[str, tuple[str, str]]:
    """{campaign_id: (head object id, signer)} of the campaign heads kept apart right now."""
    if not store.list_refs("untrusted/"):
        return {}  # the usual case: nothing was imported with --untrusted
    from clawstore.store.untrusted import kept_apart_heads

    return kept_apart_heads(store)


class StoredRecords:
    """get_json that tolerates a missing record (gc'd or never written) or one no column can hold: its node row has
    nulls and `warn` names it, so one bad record never stops the index. Records announced by `read_ahead` are read in
    bulk."""

    def __init__(self, store: ObjectReader, warn: Warn | None = None):
        self._store, self._warn = store, warn
        self._ahead: dict[str, bytes] = {}

    def read_ahead(self, oids: list[str]) -> None:
        if isinstance(self._store, ObjectReader):
            self._ahead = self._store.get_many_bytes(oids)

    def raw(self, oid: str) -> bytes | None:
        """The stored bytes of `oid`, None when it is missing."""
        data = self._ahead.pop(oid, None)
        try:
            return data if data is not None else self._store.get_bytes(oid)
        except MissingObjectError:
            return None

    def __call__(self, oid: str) -> Mapping[str, Any] | None:
        data = self._ahead.pop(oid, None)
        try:
            value = jsontext.loads(data) if data is not None else self._store.get_json(oid)
        except MissingObjectError:
            return None
        if not isinstance(value, Mapping):
            return None
        problem = metrics_problem(value.get("metrics"))
        if problem:
            if self._warn is not None:
                self._warn(f"record {oid}: {problem}; left out of the query")
            return None
        return value


class BuildRows(NamedTuple):
    """A build's rows, with the log they came from and what serves the head it wrote (same_rows): the actions of the
    nodes flattened (in the rows' order, beside `rows.sigs`) and that head's stored document (its parts not read)."""

    log: Mapping[str, Any]
    actions: list[Any]
    rows: Flattened
    head: Mapping[str, Any]  # the head the build wrote, as stored ({} if none)
    segment: Path | None = None  # where they were published, if they were


def stored_build_rows(store: ObjectReader, log: Mapping[str, Any], warn: Warn | None = None,
                      reusable: Reusable | None = None, spill_in: Path | None = None) -> BuildRows:
    """The rows of a build log or head, its records read from `store`; those of nodes `reusable` holds
    are left to the writer to copy from its source (rows.flatten). With `spill_in` (a manifest), the rows
    are spilled to files under its tmp/ as they are made (spill.py), not held; with nothing reusable, they are
    flattened by DuckDB where every record allows it (sqlflat.py), else by rows.py. The nodes the build reused are
    read from the head it wrote a part at a time: that head is never held whole."""
    head = _written_head_doc(store, log)
    try:
        return _build_rows(store, log, warn, reusable, spill_in, head)
    except StoreError:
        if not head:
            raise
        # A part of the head it wrote is lost (fsck names it): its reused nodes are left out, as when that head was
        # read whole and could not be.
        return _build_rows(store, log, warn, reusable, spill_in, {})


def _build_rows(store: ObjectReader, log: Mapping[str, Any], warn: Warn | None, reusable: Reusable | None,
                spill_in: Path | None, head: Mapping[str, Any]) -> BuildRows:
    records = StoredRecords(store, warn)
    actions: list[Any] = []
    if spill_in is not None and reusable is None:
        made = flattened_here(store, log, _noting_actions(_build_nodes(store, log, head), actions), spill_in)
        if made is not None:
            return BuildRows(log, actions, made, head)
        actions.clear()
    nodes = _noting_actions(_build_nodes(store, log, head), actions)
    if spill_in is None:
        return BuildRows(log, actions, flatten(log, records, records.read_ahead, nodes, reusable), head)
    return BuildRows(log, actions, spilled(lambda sink: flatten(log, records, records.read_ahead, nodes, reusable,
                                                                sink), spill_in), head)


def _written_head_doc(store: ObjectReader, log: Mapping[str, Any]) -> Mapping[str, Any]:
    """The head a format-2 build wrote, as stored (its parts not read); {} when it wrote none (a no-op build), the
    log is no such build's, or the head is missing (its reused nodes are then not the build's rows: fsck names it)."""
    head_id = log.get("head")
    if log.get("format") != 2 or not log.get("head_written") or not isinstance(head_id, str):
        return {}
    doc = StoredRecords(store)(head_id)
    return doc if isinstance(doc, dict) else {}


def _build_nodes(store: ObjectReader, log: Mapping[str, Any], head: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """rows.build_nodes, streamed: the log's nodes, then those `head` (the head it wrote) says it reused, read a
    part at a time (StoreError when a part of it is lost)."""
    yield from ((node if isinstance(node, dict) else {}) for node in log.get("nodes") or [])
    if head:
        yield from rows_module.reused_nodes(log, head_nodes(head, StoredRecords(store)))


def _noting_actions(nodes: Iterable[Mapping[str, Any]], actions: list[Any]) -> Iterator[Mapping[str, Any]]:
    for node in nodes:
        action = node.get("action")
        actions.append(sys.intern(action) if type(action) is str else action)  # (one str an action, not a node)
        yield node


def spilled(make: Callable[[Spill], Flattened], manifest: Path) -> Flattened:
    """make(sink) with a Spill under the manifest's tmp/ (removed if it fails; else the writer removes it)."""
    sink = Spill(segments.tmp_dir(manifest, "rows"))
    try:
        rows = make(sink)
        sink.close()
    except BaseException:
        sink.remove()
        raise
    return rows


def stored_rows(store: ObjectReader, log: Mapping[str, Any], warn: Warn | None = None
                ) -> dict[str, list[Row]]:
    """The tables of `stored_build_rows` (what `claw report` and a rebuilt manifest need)."""
    return stored_build_rows(store, log, warn).rows.tables


def previous_head(manifest: Path, log: Mapping[str, Any]) -> Path | None:
    """The materialised head its campaign had when the manifest last looked: it holds the rows of most
    nodes a new build or head of that campaign reuses (copied.py)."""
    campaign = build_context(log)["campaign_id"]
    hexid = read_current(manifest).get(campaign) if campaign is not None else None
    path = heads_dir(manifest) / hexid if isinstance(hexid, str) else None
    return path if path is not None and path.is_dir() else None


ROWS_STAMP = "rows.json"  # in a head's directory: the head and the flattening (rows._CODE_TAG) its rows came from


def _rows_stamp(hexid: str) -> bytes:
    return json.dumps({"head": hexid, "rows": rows_module._CODE_TAG.hex()}, sort_keys=True).encode()


def materialised_rows(manifest: Path, head_id: str, head: Mapping[str, Any], tables: Sequence[str],
                      columns: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[Row]] | None:
    """The rows of `tables` materialised for this head, read back from its directory, if they are what flattening gives
    now (one row per node, matching the head's node signatures); None otherwise, and the caller flattens. `columns`:
    {table: the columns wanted} (default all). Details: docs/query.md (Details by module)."""
    directory = heads_dir(manifest) / _hex(head_id)
    if not directory.is_dir():
        return None
    wanted = Counter(node_sig(node) for node in build_nodes(head, _no_records))
    con = duck.connect()
    try:
        con.execute("SET TimeZone = 'UTC'").fetchall()
        nodes = directory / "nodes.parquet"
        found = Counter(sig for (sig,) in con.execute(
            f"SELECT {copied.SIG} FROM read_parquet(?)", [str(nodes)]).fetchall())
        if found != wanted:
            return None
        _stamp(directory, _hex(head_id))
        return _read_tables(con, directory, tables, columns)
    except duckdb.Error:
        return None
    finally:
        con.close()


def _stamp(directory: Path, hexid: str) -> None:
    """Stamp a head's directory whose every signature was just checked (one an older claw published): the next
    reader need not check them again. Derived data: a stamp lost (a crash, a directory removed meanwhile) is
    only a slower read."""
    if not (directory / ROWS_STAMP).is_file():
        with contextlib.suppress(OSError):
            write_file_atomic(directory / ROWS_STAMP, _rows_stamp(hexid), directory, durable=False)


def stamped_rows(manifest: Path, head_id: str, node_count: Any, tables: Sequence[str],
                 columns: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[Row]] | None:
    """materialised_rows without the head's nodes: when the head's directory carries the stamp its rows were published
    with (this head, this flattening) and holds `node_count` (the head's) node rows, each with a signature (every
    record read), its rows are the head's. None otherwise (no stamp: an older claw's; anything amiss): the caller
    takes the full path. Details: docs/query.md (Details by module)."""
    directory = heads_dir(manifest) / _hex(head_id)
    try:
        if type(node_count) is not int or (directory / ROWS_STAMP).read_bytes() != _rows_stamp(_hex(head_id)):
            return None
    except OSError:
        return None
    con = duck.connect()
    try:
        con.execute("SET TimeZone = 'UTC'").fetchall()
        counted = con.execute(f"SELECT count(*), count({copied.SIG}) FROM read_parquet(?)",
                              [str(directory / "nodes.parquet")]).fetchone()
        if counted != (node_count, node_count):
            return None
        return _read_tables(con, directory, tables, columns)
    except duckdb.Error:
        return None
    finally:
        con.close()


def _select(table: str, columns: Mapping[str, Sequence[str]] | None) -> tuple[list[str], str]:
    """The names of the columns wanted of `table` (all when `columns` does not name it), and their SELECT list."""
    wanted = None if columns is None or table not in columns else set(columns[table])
    chosen = [c for c in PHYSICAL[table] if wanted is None or c.name in wanted]
    select = ", ".join(f'CAST("{c.name}" AS VARCHAR)' if c.type == "TIMESTAMP" else f'"{c.name}"'
                       for c in chosen)  # (as rows.to_timestamp writes them)
    return [c.name for c in chosen], select


def _read_tables(con: duckdb.DuckDBPyConnection, directory: Path, tables: Sequence[str],
                 columns: Mapping[str, Sequence[str]] | None) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for table in tables:
        names, select = _select(table, columns)
        cursor = con.execute(f"SELECT {select} FROM read_parquet(?)", [str(directory / f"{table}.parquet")])
        out[table] = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return out


STREAM_ROWS = 8192  # rows held at once by streamed_rows
# Rows streamed_rows has DuckDB sort at once: the table is sorted a range of its `by` keys at a time, each range
# holding at most this many rows (or one key's, when that key alone has more), so that what the sort holds does not
# grow with the campaign (sorted whole, the 10,000 x 5 campaign's nodes took ~48 MB of RSS, 2,000 x 5's ~11 MB). The
# size of a Parquet row group (segments.ROW_GROUP): a range's rows are about one group's worth, however they spread.
SORT_ROWS = 16_384
# What DuckDB may hold while streamed_rows sorts, whatever the campaign: past it, the sort spills to a directory under
# the manifest's tmp/ (removed after). docs/query.md (Details by module: stamped_rows, streamed_rows).
SORT_MEMORY = "64MB"


def streamed_rows(manifest: Path, head_id: str, table: str, columns: Sequence[str], by: Sequence[str]
                  ) -> Iterator[Row]:
    """The rows of `table` of a head stamped_rows answered for, ordered by the columns `by` (rows alike in them in the
    order stored), STREAM_ROWS at a time: one group after another without the table in memory, DuckDB sorting a range
    of keys of SORT_ROWS rows at a time, held to SORT_MEMORY. A duckdb.Error mid-way (the directory removed meanwhile)
    reaches the caller, who starts over on the full path."""
    names, select = _select(table, {table: columns})
    order = ", ".join(f'"{name}"' for name in by)
    with segments.bounded(manifest, SORT_MEMORY) as con:
        con.execute("SET TimeZone = 'UTC'").fetchall()
        path = str(heads_dir(manifest) / _hex(head_id) / f"{table}.parquet")
        bound = _bound(table, by)
        for low, high in _key_ranges(con, path, order):
            narrowed, values = _narrowed(by, low, high)
            cursor = con.execute(f"SELECT {select} FROM read_parquet(?, file_row_number = true) "
                                 f"WHERE row({order}) BETWEEN {bound} AND {bound}{narrowed} "
                                 f"ORDER BY {order}, file_row_number", [path, *low, *high, *values])
            while batch := cursor.fetchmany(STREAM_ROWS):
                for row in batch:
                    yield dict(zip(names, row, strict=True))


def _bound(table: str, by: Sequence[str]) -> str:
    """A row of parameters of the types of `by`'s columns, compared with the row of those columns as DuckDB compares
    structs: in ORDER BY's order (field by field, a null after every value)."""
    types = {column.name: column.type for column in PHYSICAL[table]}
    return f"row({', '.join(f'CAST(? AS {types[name]})' for name in by)})"


def _narrowed(by: Sequence[str], low: tuple[Any, ...], high: tuple[Any, ...]) -> tuple[str, list[Any]]:
    """A condition on `by`'s second column (and its parameters) when a range is of one value of the first (the common
    range: one model's cases), so that DuckDB reads only the row groups whose statistics can hold the range: the
    ranges together read about the file once, not once each."""
    if len(by) < 2 or low[0] != high[0] or None in (low[0], low[1], high[1]):
        return "", []
    return f' AND "{by[1]}" BETWEEN ? AND ?', [low[1], high[1]]


def _key_ranges(con: duckdb.DuckDBPyConnection, path: str, order: str) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """(first key, last key) of each range of the file's keys in ORDER BY's order holding at most SORT_ROWS rows (a key
    holding more, alone): one per range, whatever the rows (the keys themselves are streamed, counted by DuckDB)."""
    ranges: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    cursor = con.execute(f"SELECT {order}, count(*) FROM read_parquet(?) GROUP BY ALL ORDER BY {order}", [path])
    low: tuple[Any, ...] | None = None
    high: tuple[Any, ...] = ()
    held = 0
    while batch := cursor.fetchmany(STREAM_ROWS):
        for *key, count in batch:
            if low is not None and held + count > SORT_ROWS:
                ranges.append((low, high))
                low = None
            if low is None:
                low, held = tuple(key), 0
            high, held = tuple(key), held + count
    if low is not None:
        ranges.append((low, high))
    return ranges


def _no_records(oid: str) -> None:
    return None  # (a head's nodes are all in the head: build_nodes reads no record for it)


def written(write: Callable[[Flattened], T], rows: Flattened, again: Callable[[], Flattened]
            ) -> tuple[T, Flattened]:
    """write(rows), and the rows written: if the directory its copied rows come from went away meanwhile
    (a compaction, another process's refresh), those `again` flattens in full."""
    try:
        return write(rows), rows
    except duckdb.Error:
        if rows.source is None:
            raise
        rows = again()
        return write(rows), rows


def _head_rows(store: StoreReader, manifest: Path, head_id: str, warn: Warn | None, known: BuildRows | None,
               copy: bool = True, here: bool = True) -> tuple[Flattened, Path | None, parted.Parts | None] | None:
    """The rows of a head, the segment already holding them as files, and the head's parts when the rows are in their
    order: those of `known` (the build just indexed) when it wrote this head with the same rows, else copied from the
    campaign's previous head (unless not `copy`) or flattened a part of the head at a time into files (spill.py).
    Details: docs/query.md (Details by module)."""
    if known is not None and not (known.log.get("head") == head_id and known.head):
        known = None  # another build's rows
    records = StoredRecords(store, warn)
    if known is not None:
        try:
            if same_rows(known.log, known.rows.sigs, known.actions, head_fields(known.head),
                         head_nodes(known.head, StoredRecords(store))):
                rows = known.rows
                return (rows._replace(tables={table: rows.tables.get(table, []) for table in HISTORY_VIEW}),
                        known.segment, None)  # (in the build's order, not the parts')
        except StoreError:
            return None  # a part lost to damage, as below
    load = StoredRecords(store)
    doc = load(head_id)
    if not isinstance(doc, dict):
        return None  # a head lost to damage: fsck names it; the campaign simply has no rows here
    head = head_fields(doc)
    parts: parted.Parts | None = [] if is_parted(doc) else None
    nodes = chain(head_nodes(doc, load, parts), build_nodes(head, records))
    source = previous_head(manifest, head) if copy else None
    reuse = copied.reusable(source) if source is not None else None
    try:
        if reuse is None and here:  # every node flattened: by DuckDB, unless a record is odd (sqlflat.py)
            made = flattened_here(store, head, nodes, manifest)
            if made is not None:
                return made._replace(tables={}), None, parts
            return _head_rows(store, manifest, head_id, warn, None, copy=False, here=False)
        rows = spilled(lambda sink: flatten(head, records, records.read_ahead, nodes, reuse, sink), manifest)
    except StoreError:
        return None  # a part lost to damage, as above
    return rows._replace(tables={}), None, parts


def flattened_here(store: ObjectReader, log: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]], manifest: Path
                   ) -> Flattened | None:
    """sqlflat.flatten_here in a new directory under the manifest's tmp/ (the writer removes it), or None (removed)."""
    work = segments.tmp_dir(manifest, "rows")
    try:
        rows = sqlflat.flatten_here(log, nodes, store, work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if rows is None:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def head_nodes(doc: Mapping[str, Any], load: StoredRecords, parts: parted.Parts | None = None
               ) -> Iterator[Mapping[str, Any]]:
    """A head's nodes a part at a time, without their planning views (rows.without_planning_views); each part's id and
    nodes added to `parts` as it is read (a parted head's)."""
    if not is_parted(doc):
        yield from (without_planning_views(doc).get("nodes") or [])
        return
    for part_id, part in zip(doc["node_parts"], iter_parts(doc, lambda part_id: _part_without_planning_views(
            load, part_id)), strict=False):
        if parts is not None:
            parts.append((part_id, len(part)))
        for node in part:
            if isinstance(node, dict) and "record_doc" in node:  # (a part read whole: below)
                node = dict(node)
                node.pop("record_doc", None)
            yield node


class _Part(msgspec.Struct, forbid_unknown_fields=True):  # (what headdoc writes: another key, the part is read whole)
    nodes: list[dict[str, msgspec.Raw]]
    head_part: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_PART = msgspec.json.Decoder(_Part)


def _part_without_planning_views(load: StoredRecords, part_id: str) -> Any:
    """A head part as `load` reads it, its nodes' planning views never decoded: a node's other values are decoded
    one by one (the same values, keys in the same order), the planning view skipped. Building it and copying each node
    to drop it was half of what reading a head cost (docs/query.md, Scale). A part of another shape is read whole."""
    data = load.raw(part_id)
    if data is None:
        return None
    try:
        part = _PART.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return load(part_id)
    loads = jsontext.loads
    return {"nodes": [{key: loads(value) for key, value in node.items() if key != "record_doc"}
                      for node in part.nodes]}


def publish_head(manifest: Path, hexid: str, tables: Mapping[str, list[Row]] | Flattened | None,
                 segment: Path | None = None, parts: parted.Parts | None = None, ready: Path | None = None) -> None:
    """Write one head's rows (or link the files of `segment`, which holds them, or take the directory `ready` made
    under tmp/), and its parts when the rows are in their order; the directory appears by one rename (a head is
    immutable: first one wins), parts.json in it (parted.py)."""
    root = heads_dir(manifest)
    root.mkdir(parents=True, exist_ok=True)
    tmp = ready if ready is not None else (
        None if segment is None else segments.link_segment_dir(manifest, "head", segment, HISTORY_VIEW))
    if tmp is None:
        assert tables is not None
        tmp = segments.write_segment_dir(manifest, "head", tables)
    try:
        parted.write_parts(tmp, hexid, parts)
        (tmp / ROWS_STAMP).write_bytes(_rows_stamp(hexid))  # (lost in a crash: readers check every signature)
        os.rename(tmp, root / hexid)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # already there: the same rows
        if not (root / hexid).is_dir():
            raise
    segments.fsync_dir(root)


def publish_current(manifest: Path, campaigns: Mapping[str, str],
                    untrusted: Mapping[str, tuple[str, str]] | None = None) -> None:
    """Atomically replace current.json with {campaign_id: head hex} and the kept-apart heads."""
    root = heads_dir(manifest)
    root.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"campaigns": dict(sorted(campaigns.items()))}
    if untrusted:
        doc["untrusted"] = {c: {"head": h, "signer": s} for c, (h, s) in sorted(untrusted.items())}
    write_file_atomic(root / "current.json", json.dumps(doc).encode(), root)


def heads_changed(store: StoreReader, manifest: Path) -> bool:
    """True when the campaign refs point somewhere `current.json` (or its directories) does not."""
    wanted = {campaign: _hex(oid) for campaign, oid in wanted_heads(store).items()}
    apart = {campaign: (_hex(oid), signer) for campaign, (oid, signer) in wanted_untrusted(store).items()}
    root = heads_dir(manifest)
    on_disk = [*wanted.values(), *(h for h, _ in apart.values())]
    return (wanted != read_current(manifest) or apart != read_untrusted(manifest)
            or any(not (root / h).is_dir() for h in on_disk))


def materialise_head(store: StoreReader, manifest: Path, head_id: str, warn: Warn | None = None,
                     known: BuildRows | None = None) -> bool:
    """Give a head its directory of rows, unless it has one; False when the head cannot be read.
    `known`: the rows of the build just indexed that wrote it (the head gets them, when they are its
    rows: index_pending calls this right after that build, so no build's rows are held longer)."""
    hexid = _hex(head_id)
    if (heads_dir(manifest) / hexid).is_dir():
        return True
    if known is None or known.log.get("head") != head_id:
        made = _parted_rows(store, manifest, head_id, warn)
        if made is not None:
            publish_head(manifest, hexid, None, parts=made[1], ready=made[0])
            return True
    found = _head_rows(store, manifest, head_id, warn, known)
    if found is None:
        return False
    rows, segment, parts = found
    again_parts: list[parted.Parts | None] = []

    def flattened_again() -> Flattened:
        again = _head_rows(store, manifest, head_id, warn, None, copy=False)
        if again is None:
            raise StoreError(f"campaign head {head_id} can no longer be read")
        again_parts.append(again[2])
        return again[0]

    try:
        written(lambda flat: publish_head(manifest, hexid, flat, segment, again_parts[-1] if again_parts else parts),
                rows, flattened_again)
    except segments.SpilledAlready:  # the build's rows, spilled and written into its segment, which cannot be linked
        publish_head(manifest, hexid, flattened_again(), parts=again_parts[-1])
    return True


def _parted_rows(store: StoreReader, manifest: Path, head_id: str, warn: Warn | None
                 ) -> tuple[Path, parted.Parts] | None:
    """parted.refresh of the head from its campaign's previous head directory (None: the full refresh)."""
    load = StoredRecords(store)
    doc = load(head_id)
    if not isinstance(doc, dict) or not is_parted(doc):
        return None
    records = StoredRecords(store, warn)
    return parted.refresh(manifest, doc, previous_head(manifest, head_fields(doc)), records, records.read_ahead,
                          lambda part_id: _part_without_planning_views(load, part_id))


def stale_campaign_head(store: StoreReader, manifest: Path, campaign: str) -> tuple[str, str | None] | None:
    """(head, None) of the campaign's ref, or (head, signer) of the head kept apart as untrusted when it
    has no ref (what the report shows), when `current.json` (or its directory) does not have it yet."""
    oid = wanted_heads(store).get(campaign)
    signer: str | None = None
    if oid is not None:
        published = read_current(manifest).get(campaign) == _hex(oid)
    else:
        apart = wanted_untrusted(store).get(campaign)
        if apart is None:
            return None
        oid, signer = apart
        published = read_untrusted(manifest).get(campaign) == (_hex(oid), signer)
    return None if published and (heads_dir(manifest) / _hex(oid)).is_dir() else (oid, signer)


def refresh_campaign_head(store: StoreReader, manifest: Path, campaign: str, warn: Warn | None = None) -> None:
    """Materialise one campaign's current head and name it in `current.json`, where the other campaigns
    keep the heads they had (the next refresh_heads brings them up to date and removes what no entry
    names any more). Call under the index lock."""
    stale = stale_campaign_head(store, manifest, campaign)
    if stale is None or not materialise_head(store, manifest, stale[0], warn):
        return
    (oid, signer), current, apart = stale, read_current(manifest), read_untrusted(manifest)
    if signer is None:
        current[campaign] = _hex(oid)
    else:
        apart[campaign] = (_hex(oid), signer)
    publish_current(manifest, current, apart)
    _remove_unnamed_heads(manifest, current, apart)  # the head it replaced: reports would pile up copies


def refresh_heads(store: StoreReader, manifest: Path, warn: Warn | None = None) -> bool:
    """Materialise every current head not on disk yet and publish `current.json`. Call under the index
    lock. Returns True when what the plain views show changed."""
    heads = wanted_heads(store)
    kept = wanted_untrusted(store)
    wanted = {campaign: _hex(oid) for campaign, oid in heads.items()}
    apart = {campaign: (_hex(oid), signer) for campaign, (oid, signer) in kept.items()}
    root = heads_dir(manifest)
    oids = {_hex(oid): oid for oid in [*heads.values(), *(oid for oid, _ in kept.values())]}
    missing = {hexid for hexid in oids if not (root / hexid).is_dir()}
    if wanted == read_current(manifest) and apart == read_untrusted(manifest) and not missing:
        return False
    for hexid in sorted(missing):
        if not materialise_head(store, manifest, oids[hexid], warn):
            wanted = {c: h for c, h in wanted.items() if h != hexid}
            apart = {c: entry for c, entry in apart.items() if entry[0] != hexid}
    publish_current(manifest, wanted, apart)
    _remove_unnamed_heads(manifest, wanted, apart)
    return True


def _remove_unnamed_heads(manifest: Path, campaigns: Mapping[str, str], untrusted: Mapping[str, tuple[str, str]]
                          ) -> None:
    """Remove the head directories `current.json` (just published as these) no longer names: a reader
    still on the old current.json retries with the new one. Found among the directory's own entries, so
    no text in current.json ever names a path to remove."""
    keep = set(campaigns.values()) | {h for h, _ in untrusted.values()}
    for entry in heads_dir(manifest).iterdir():
        if entry.is_dir() and entry.name not in keep:
            shutil.rmtree(entry, ignore_errors=True)
