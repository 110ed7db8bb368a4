"""The manifest on disk: immutable Parquet segments, one directory per build, plus one compacted pack.

Layout and compaction: docs/query.md (Details by module)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import blake3
import duckdb

from clawstore.errors import StoreError
from clawstore.query import copied, duck
from clawstore.query.jsonarray import write_array
from clawstore.query.rows import Flattened, Row
from clawstore.query.schema import PHYSICAL, Column
from clawstore.query.sqltext import literal
from clawstore.values.costs import USD_DIGITS

# What DuckDB holds while it writes a table, whatever the campaign (docs/query.md, Scale): one thread, row groups of
# ROW_GROUP rows. Writing a 200,000-node campaign's nodes held 357 MB with two threads and the default 122,880-row
# groups, 130 MB so, and took 1.5 s instead of 2.3 s.
ROW_GROUP = 16384
COMPACT_AT = 16  # segments waiting beside the pack before a refresh merges them
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}$")


def slot_for(build_id: str) -> str:
    """A file-name-safe directory name for a build id: the id itself (build ids are
    `<UTC stamp>-<hex>`), else a hash of it."""
    if _SAFE.match(build_id):
        return build_id
    return "h-" + blake3.blake3(build_id.encode()).hexdigest()[:32]


@dataclass
class Snapshot:
    """The files a reader should use right now."""

    pack: Path | None = None
    covers: frozenset[str] = frozenset()
    segments: dict[str, Path] = field(default_factory=dict)  # slot -> newest segment dir

    def pack_chunks(self, table: str) -> list[str]:
        return [str(p) for p in pack_chunks(self.pack, table)] if self.pack else []

    def history_files(self, table: str) -> list[str]:
        return self.pack_chunks(table) + self.segment_files(table)

    def segment_files(self, table: str) -> list[str]:
        return [str(d / f"{table}.parquet") for _, d in sorted(self.segments.items())]


class SpilledAlready(StoreError):
    """Rows a Spill wrote were asked for again after DuckDB read them (once only: the files are removed then)."""


class ManifestChanged(StoreError):
    """A pack the reader's snapshot names was replaced meanwhile (a compaction): take a new snapshot."""


def pack_chunks(pack: Path, table: str) -> list[Path]:
    """A pack's history chunks of `table`, oldest first. A pack holds chunks of every table, so none
    means it was removed (ManifestChanged): its rows are in the newer pack, not gone."""
    try:
        chunks = sorted(pack.glob(f"{table}.*.parquet"))
    except FileNotFoundError:  # (removed between glob's look at the directory and its listing)
        chunks = []
    if not chunks and not pack.is_dir():
        raise ManifestChanged(f"pack {pack.name} was replaced by a compaction")
    return chunks


def _chunk_name(table: str, number: int) -> str:
    return f"{table}.{number:06d}.parquet"


def _split_segment(name: str) -> tuple[str, int] | None:
    slot, sep, stamp = name.rpartition("@")
    if not sep or not stamp.isdigit():
        return None
    return slot, int(stamp)


def _packs(manifest: Path) -> list[Path]:
    root = manifest / "packs"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def _all_segment_dirs(manifest: Path) -> list[tuple[str, int, Path]]:
    seg_root = manifest / "segments"
    out = []
    if seg_root.is_dir():
        for entry in seg_root.iterdir():
            parsed = _split_segment(entry.name)
            if parsed:
                out.append((parsed[0], parsed[1], entry))
    return out


def _newest(segments: list[tuple[str, int, Path]]) -> dict[str, tuple[int, Path]]:
    newest: dict[str, tuple[int, Path]] = {}
    for slot, stamp, path in segments:
        if slot not in newest or stamp > newest[slot][0]:
            newest[slot] = (stamp, path)
    return newest


def snapshot(manifest: Path) -> Snapshot:
    """What a reader should see: the newest pack and the newest segment of each build it does not cover.

    Segments are listed before packs: a compaction that lands in between then only hides segments it
    merged; a file deleted under a running query makes the caller retry with a fresh snapshot.
    """
    while True:
        newest = _newest(_all_segment_dirs(manifest))
        packs = _packs(manifest)
        snap = _newest_readable(packs)
        if snap.pack == (packs[-1] if packs else None) or _packs(manifest) == packs:
            break
        # The newest pack vanished as we opened it: a compaction replaced it and may already have
        # deleted segments we listed, so an older pack plus those segments would hide builds. Look again.
    snap.segments = {slot: path for slot, (_, path) in newest.items() if slot not in snap.covers}
    return snap


def _newest_readable(packs: list[Path]) -> Snapshot:
    """The newest of `packs` whose covers can be read (an unreadable newest one that stays is damaged)."""
    for pack in reversed(packs):
        try:
            covers = json.loads((pack / "covers.json").read_text())
        except (OSError, ValueError):
            continue
        return Snapshot(pack=pack, covers=frozenset(covers["slots"]))
    return Snapshot()


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    for child in path.iterdir():
        with open(child, "rb") as fh:
            os.fsync(fh.fileno())
    fsync_dir(path)


def _select_typed(table: str, source: str, extra: Sequence[Column] = ()) -> str:
    cols = ", ".join(f'CAST("{c.name}" AS {c.type}) AS "{c.name}"' for c in [*PHYSICAL[table], *extra])
    return f"SELECT {cols} FROM {source}"


def _json_struct(columns: Sequence[Column]) -> str:
    return "{" + ", ".join(f"'{c.name}': '{c.type}'" for c in columns) + "}"


def _sql_list(paths: Sequence[str]) -> str:
    return "[" + ", ".join(literal(p) for p in paths) + "]"


def write_tables(con: duckdb.DuckDBPyConnection, tables: Mapping[str, list[Row]] | Flattened,
                 out_dir: Path, which: Sequence[str] = tuple(PHYSICAL), taken_loaded: bool = False,
                 shape: Callable[[str, str], str] | None = None, by_sig: bool = False) -> None:
    """Write every physical table's rows (or those of `which`, in that order) as `<out_dir>/<table>.parquet` (typed
    even when empty). Given a build's `Flattened` rows, also its hidden columns, and the rows it takes from its source
    (copied.py: its `taken`, or `con`'s table of them if `taken_loaded`); rows a Spill wrote are read from its files,
    and its directory removed (read once, written or not). `shape(table, source)`: the rows' source as written;
    `by_sig`: copied.copied_sql's."""
    flat = tables if isinstance(tables, Flattened) else None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        rows = flat.tables if flat is not None else tables
        taken = flat is not None and flat.source is not None and (bool(flat.taken) or taken_loaded)
        if taken and not taken_loaded:
            assert flat is not None and flat.source is not None
            copied.load_taken(con, flat.taken, out_dir)
        for table in which:
            hidden = copied.HIDDEN.get(table, []) if flat is not None else []
            metas = flat.meta.get(table, []) if flat is not None else []
            array = _array_of(flat, table, out_dir)
            made = array.with_suffix(".parquet")
            if made.parent != out_dir and made.is_file():  # (written as they are by sqlflat.flatten_here)
                os.replace(made, out_dir / made.name)
                continue
            if not array.is_file():  # (rows a Spill wrote are there already, with their hidden columns)
                table_rows: Iterable[Row] = rows.get(table, [])
                if hidden:
                    table_rows = ({**row, **copied.hidden_values(table, metas[at], at)}
                                  for at, row in enumerate(table_rows))
                write_array(array, table_rows)
            columns = [*PHYSICAL[table], *hidden, *(copied.ORDER if hidden else [])]
            source = f"read_json({literal(str(array))}, format='array', columns={_json_struct(columns)})"
            if taken and hidden:
                assert flat is not None and flat.source is not None
                source = (f"(SELECT * FROM {source} UNION ALL BY NAME "
                          f"{copied.copied_sql(table, flat.source, flat.ctx, by_sig)} ORDER BY _claw_pos, _claw_sub)")
            if shape is not None:
                source = shape(table, source)
            target = literal(str(out_dir / f"{table}.parquet"))
            con.execute(f"COPY ({_select_typed(table, source, hidden)}) TO {target} "
                        f"(FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})").fetchall()
            array.unlink()
    finally:
        if flat is not None and flat.spilled is not None:
            shutil.rmtree(flat.spilled, ignore_errors=True)


def _array_of(flat: Flattened | None, table: str, out_dir: Path) -> Path:
    """Where `table`'s rows are as a JSON array: the file a Spill wrote them to, else one to write in `out_dir`."""
    if flat is not None and flat.spilled is not None and table in copied.HIDDEN:
        if not flat.spilled.is_dir():  # (written once: rows read again would be none, never the campaign's)
            raise SpilledAlready(f"the rows spilled to {flat.spilled} were written already")
        return flat.spilled / f"{table}.json"
    return out_dir / f"{table}.json"


def tmp_dir(manifest: Path, what: str) -> Path:
    tmp = manifest / "tmp" / f"{what}.{os.getpid()}.{time.time_ns()}"
    tmp.mkdir(parents=True)
    return tmp


# What DuckDB may hold while it writes a segment or head (the copied rows joined and sorted back into node order),
# whatever the campaign: past it, it spills under the manifest's tmp/. docs/query.md (Details by module: segments).
WRITE_MEMORY = "128MB"


@contextlib.contextmanager
def bounded(manifest: Path, memory: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection of one thread holding at most `memory`, spilling past it into a directory under the
    manifest's tmp/ (removed after; never DuckDB's default, `.tmp` in the working directory). A manifest it cannot
    write to: no spill, and a statement that needs more fails (duckdb.Error: the callers' full or slower path)."""
    try:
        spill: Path | None = tmp_dir(manifest, "spill")
    except OSError:
        spill = None
    con = duck.connect(threads=1, memory_limit=memory, temp_directory=str(spill) if spill is not None else "")
    try:
        yield con
    finally:
        con.close()
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)


def write_segment_dir(manifest: Path, what: str, tables: Mapping[str, list[Row]] | Flattened) -> Path:
    """Write `tables` into a new, fsynced directory under tmp/ for the caller to rename into place."""
    tmp = tmp_dir(manifest, what)
    try:
        with bounded(manifest, WRITE_MEMORY) as con:
            write_tables(con, tables, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_tree(tmp)
    return tmp


def link_segment_dir(manifest: Path, what: str, source: Path, tables: Iterable[str]) -> Path | None:
    """A new fsynced directory under tmp/ whose `<table>.parquet` files are hard links to those of
    `source` (immutable: the same rows, not written again); None when one cannot be linked (`source`
    merged into a pack meanwhile, or a file system without hard links): then write them."""
    tmp = tmp_dir(manifest, what)
    try:
        for table in tables:
            os.link(source / f"{table}.parquet", tmp / f"{table}.parquet")
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    fsync_tree(tmp)
    return tmp


def publish_segment(manifest: Path, build_id: str, tables: Mapping[str, list[Row]] | Flattened) -> Path:
    """Write one build's rows as a new segment directory, appearing atomically."""
    tmp = write_segment_dir(manifest, "segment", tables)
    seg_root = manifest / "segments"
    seg_root.mkdir(parents=True, exist_ok=True)
    final = seg_root / f"{slot_for(build_id)}@{time.time_ns():020d}"
    os.rename(tmp, final)
    fsync_dir(seg_root)
    return final


@contextlib.contextmanager
def compaction_lock(manifest: Path, wait: bool) -> Iterator[bool]:
    """An flock so two compactions never race (segment writers never take it). Yields False if busy."""
    manifest.mkdir(parents=True, exist_ok=True)
    with open(manifest / "compact.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def files_sql(paths: Sequence[str]) -> str:
    return f"read_parquet({_sql_list(paths)}, union_by_name=true)"


# The columns that hold a sum of costs claw made (rows.py, sqlflat.py), as a view shows them: rounded to USD_DIGITS
# decimals like every cost sum claw shows (values/costs.py `shown_usd`; docs/query.md); the files keep the float sum.
SUMMED_USD = {"results": ("eval_cost_usd", "total_cost_usd"),
              "builds": ("cost_usd", "cost_known_usd", "results_cost_usd")}


def _shown_usd(column: str) -> str:
    """values/costs.py `shown_usd` in SQL: a cost under 5e-11 USD kept, not rounded to 0 (free)."""
    rounded = f'round("{column}", {USD_DIGITS})'
    return f'CASE WHEN {rounded} = 0 THEN "{column}" ELSE {rounded} END'


def project(table: str, source: str) -> str:
    """Fixed column order whatever the files' order (UNION BY NAME reorders); SUMMED_USD's columns rounded."""
    summed = SUMMED_USD.get(table, ())
    cells = (f'{_shown_usd(c.name)} AS "{c.name}"' if c.name in summed else f'"{c.name}"' for c in PHYSICAL[table])
    return f"SELECT {', '.join(cells)} FROM {source}"


def _segment_build_ids(con: duckdb.DuckDBPyConnection, snap: Snapshot) -> list[str]:
    files = snap.segment_files("builds")
    if not files:
        return []
    rows = con.execute(f"SELECT DISTINCT build_id FROM read_parquet({_sql_list(files)})").fetchall()
    return [r[0] for r in rows if r[0] is not None]


def compact(manifest: Path, *, wait: bool = False, force: bool = False) -> bool:
    """Merge the pack and every waiting segment into a new pack. Returns True if it compacted.

    Without `force` it only runs when COMPACT_AT segments wait; without `wait` it skips when another
    process is compacting (that one merges our segment, or a later refresh will).
    """
    with compaction_lock(manifest, wait) as locked:
        return _compact_locked(manifest, force) if locked else False


def _compact_locked(manifest: Path, force: bool) -> bool:
    compacted = False
    while True:
        waiting = _newest(_all_segment_dirs(manifest))
        current = snapshot(manifest)
        # A segment of a build the pack already covers (that build was refreshed again) stays invisible
        # until merged, so it forces a round; so does one landing while we merged.
        stale = any(slot in current.covers for slot in waiting)
        if not waiting or (not force and not stale and len(waiting) < COMPACT_AT):
            return compacted
        snap = Snapshot(pack=current.pack, covers=current.covers,
                        segments={slot: path for slot, (_, path) in waiting.items()})
        _publish_pack(manifest, snap)
        for slot, stamp, path in _all_segment_dirs(manifest):
            if slot in waiting and stamp <= waiting[slot][0]:
                shutil.rmtree(path, ignore_errors=True)
        compacted, force = True, False


def rebuild(manifest: Path, builds: Iterable[tuple[str, Mapping[str, list[Row]] | Flattened]]) -> int:
    """Replace the whole manifest by one pack made from `builds` ((build_id, tables) pairs).

    Readers keep seeing the old manifest until the new pack lands. Segments refreshed meanwhile are kept
    and merged. Returns the number of builds indexed.
    """
    with compaction_lock(manifest, wait=True):
        started = time.time_ns()
        work = tmp_dir(manifest, "rebuild")
        segments: dict[str, Path] = {}
        con = duck.connect()
        try:
            for build_id, tables in builds:
                slot = slot_for(build_id)
                write_tables(con, tables, work / slot)
                segments[slot] = work / slot
        finally:
            con.close()
        _publish_pack(manifest, Snapshot(segments=segments))
        shutil.rmtree(work, ignore_errors=True)
        for _, stamp, path in _all_segment_dirs(manifest):
            if stamp < started:
                shutil.rmtree(path, ignore_errors=True)
        _compact_locked(manifest, force=False)
        return len(segments)


def _publish_pack(manifest: Path, snap: Snapshot) -> Path:
    """Merge `snap` into a new pack directory and make it the newest; delete older packs.

    Call with the compaction lock held.
    """
    gen = time.time_ns()
    tmp = tmp_dir(manifest, "pack")
    con = duck.connect()
    try:
        _merge(con, snap, tmp)
    finally:
        con.close()
    slots = sorted(set(snap.covers) | set(snap.segments))
    (tmp / "covers.json").write_text(json.dumps({"slots": slots}))
    fsync_tree(tmp)
    packs = manifest / "packs"
    packs.mkdir(parents=True, exist_ok=True)
    final = packs / f"{gen:020d}"
    os.rename(tmp, final)
    fsync_dir(packs)
    # Readers now pick the new pack; a reader still using an old one retries with a fresh snapshot.
    for old in _packs(manifest):
        if int(old.name) < gen:
            shutil.rmtree(old, ignore_errors=True)
    _clean_tmp(manifest)
    return final


MAX_CHUNKS = 8  # history chunks per table in a pack before compaction rewrites them into one


def _merge(con: duckdb.DuckDBPyConnection, snap: Snapshot, out: Path) -> None:
    """Write the pack that replaces `snap`'s pack and segments into `out`.

    History is append-only: the old pack's chunks are hard-linked (no rewrite) and the segments become
    one new chunk. Only a re-indexed build (its old rows must go) or too many chunks rewrite history.
    """
    reindexed = bool(set(snap.segments) & snap.covers)
    replaced = _segment_build_ids(con, snap) if reindexed else []
    if not snap.pack and not snap.segments:
        write_tables(con, {}, out)  # an empty manifest still has every table, typed
        for table in PHYSICAL:
            (out / f"{table}.parquet").rename(out / _chunk_name(table, 0))
    for table in PHYSICAL:
        chunks = pack_chunks(snap.pack, table) if snap.pack else []
        seg_files = snap.segment_files(table)
        rewrite = reindexed or len(chunks) >= MAX_CHUNKS
        if rewrite and (chunks or seg_files):
            parts = []
            if chunks:
                where = f" WHERE build_id NOT IN ({', '.join(literal(b) for b in replaced)})" if replaced else ""
                parts.append(f"SELECT * FROM {files_sql([str(c) for c in chunks])}{where}")
            if seg_files:
                parts.append(f"SELECT * FROM {files_sql(seg_files)}")
            source = "(" + " UNION ALL BY NAME ".join(parts) + ")"
            con.execute(f"COPY ({_select_typed(table, source)}) TO {literal(str(out / _chunk_name(table, 0)))} "
                        "(FORMAT parquet)").fetchall()
        elif chunks or seg_files:
            for chunk in chunks:
                _link_or_copy(chunk, out / chunk.name)
            if seg_files:
                number = int(chunks[-1].name.split(".")[-2]) + 1 if chunks else 0
                source = files_sql(seg_files)  # a table function: DuckDB 2 refuses it in parentheses
                con.execute(f"COPY ({_select_typed(table, source)}) TO "
                            f"{literal(str(out / _chunk_name(table, number)))} (FORMAT parquet)").fetchall()


def _link_or_copy(source: Path, target: Path) -> None:
    """Chunks are immutable, so a new pack shares them with the old one instead of copying."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _clean_tmp(manifest: Path, older_than_s: float = 3600.0) -> None:
    """Leftovers of crashed writers (never read by anyone)."""
    tmp = manifest / "tmp"
    if not tmp.is_dir():
        return
    cutoff = time.time() - older_than_s
    for entry in tmp.iterdir():
        with contextlib.suppress(OSError):
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
