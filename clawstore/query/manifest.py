"""Keep the manifest (Parquet segments under `<store>/manifest/`) in step with the build logs, lazily, so that a build
never pays for rows nobody has asked for. When each view is indexed: docs/query.md (Details by module)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import StoreError
from clawstore.host.durable import write_file_atomic
from clawstore.query import copied, segments
from clawstore.query.heads import (
    BuildRows,
    Warn,
    heads_changed,
    heads_dir,
    materialise_head,
    previous_head,
    refresh_campaign_head,
    refresh_heads,
    stale_campaign_head,
    stored_build_rows,
    wanted_heads,
    written,
)
from clawstore.query.rows import Flattened, build_context
from clawstore.query.schema import PHYSICAL
from clawstore.store.buildlogs import build_log_path, builds_dir, live_builds
from clawstore.store.core.layout import StoreLayout
from clawstore.store.logstream import read_build_log_streamed

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader


# Stores whose manifest is elsewhere meanwhile (by real path): `temporary_manifest`.
_ELSEWHERE: dict[str, Path] = {}


def manifest_dir(store_root: Path) -> Path:
    if _ELSEWHERE:
        place = _ELSEWHERE.get(os.path.realpath(store_root))
        if place is not None:
            return place
    return StoreLayout(store_root).manifest


@contextlib.contextmanager
def temporary_manifest(store_root: Path) -> Iterator[Path]:
    """The manifest of the store at `store_root` made afresh in a directory of its own in the system's temp directory
    meanwhile (what `manifest_dir` names), removed after: `claw query` of a store it cannot write, whose manifest is
    behind its builds. A SIGKILLed query's is removed by the next build or gc (host/scratch.py)."""
    from clawstore.host.scratch import scratch_dir

    key = os.path.realpath(store_root)
    with scratch_dir("claw-query-") as place:
        _ELSEWHERE[key] = Path(place) / "manifest"
        try:
            yield _ELSEWHERE[key]
        finally:
            del _ELSEWHERE[key]


def check_duckdb_can_open(manifest: Path) -> None:
    """DuckDB takes file names as UTF-8 text: under a path holding other bytes (a Latin-1 home directory)
    every statement naming a manifest file failed with a traceback. StoreError: one line, and `claw
    report` reads the records instead."""
    try:
        str(manifest).encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(f"{manifest}: the path is not UTF-8 text, which DuckDB (what claw query runs on) "
                         "cannot open; move the store to a UTF-8 path") from None


SCHEMA_STAMP = "schema.json"  # the columns the manifest's files were written with, and how their cells were made
# Raised when cells are made otherwise, so files made before are indexed again: 2, a runs row's endpoint with its
# password masked (session 62: a base_url stored before may hold one); 3, also a parameter named in percent-escapes or
# after a `;`, or hidden by a tab (`?API%5FKEY=`: shown as stored by revision 2).
ROWS_REVISION = 3


def _schema_text() -> str:
    tables = {table: [[c.name, c.type] for c in cols] for table, cols in PHYSICAL.items()}
    return json.dumps({"rows_revision": ROWS_REVISION, **tables}, sort_keys=True)


def _stale_schema(manifest: Path) -> bool:
    try:
        return (manifest / SCHEMA_STAMP).read_text(encoding="utf-8") != _schema_text()
    except (OSError, UnicodeDecodeError):  # none yet (a new manifest, or an older clawstore's)
        return True


def current_schema(manifest: Path) -> None:
    """Files written with other columns (an older clawstore) are derived data gone stale: drop them, so
    indexing starts over from the build logs and records, which the new columns are read from."""
    if not _stale_schema(manifest):
        return
    with _index_lock(manifest):
        if not _stale_schema(manifest):
            return
        for name in ("segments", "packs", "heads"):
            shutil.rmtree(manifest / name, ignore_errors=True)
        (manifest / "tmp").mkdir(exist_ok=True)
        write_file_atomic(manifest / SCHEMA_STAMP, _schema_text().encode("utf-8"), manifest / "tmp", durable=False)


def refresh_manifest(store: StoreReader, build_id: str, warn: Warn | None = None) -> None:
    """Index one build: read its log and records, publish its segment, compact if many are waiting."""
    current_schema(manifest_dir(Path(store.root)))
    _, covered = _index_build(store, build_id, warn, {})
    segments.compact(manifest_dir(Path(store.root)), wait=covered, force=covered)


def _index_build(store: StoreReader, build_id: str, warn: Warn | None, indexed: dict[str, Path]
                 ) -> tuple[BuildRows, bool]:
    """Publish one build's segment: its rows, and whether the pack covered the build already (indexed
    before and refreshed again: hidden behind the pack until merged, so the caller merges now).

    The rows of nodes it reused are copied from the segment of its campaign's build `indexed` last
    ({campaign_id: segment}, updated here), else from the campaign's current head (copied.py)."""
    root = Path(store.root)
    log = read_build_log_streamed(build_log_path(root, build_id)).to_json()
    manifest = manifest_dir(root)
    campaign = build_context(log)["campaign_id"]
    source = indexed.get(campaign) if campaign is not None else None
    source = source if source is not None and source.is_dir() else previous_head(manifest, log)
    nodeless = not log.get("nodes") and not log.get("head_written")
    if nodeless:
        source = None  # (a build with no node, a no-op's: nothing to copy, so no facts of a whole head to read)
    built = stored_build_rows(store, log, warn, copied.reusable(source) if source is not None else None, manifest)
    slot_name = str(log.get("build_id") or build_id)
    segment, rows = written(lambda rows: segments.publish_segment(manifest, slot_name, rows), built.rows,
                            lambda: stored_build_rows(store, log, warn, spill_in=manifest).rows)
    if campaign is not None and not nodeless:  # (a no-op's empty segment would leave the next build nothing to copy)
        indexed[campaign] = segment
    covered = segments.slot_for(build_id) in segments.snapshot(manifest).covers
    return built._replace(rows=rows, segment=segment), covered


def _all_builds(store: StoreReader) -> Iterator[tuple[str, Flattened]]:
    """Each build's rows, spilled to files as they are made (spill.py) for the writer to read once."""
    root = Path(store.root)
    directory = builds_dir(root)
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.json")):
        try:
            log = read_build_log_streamed(path)
        except StoreError:
            continue  # a log being written for the first time, or damaged: nothing to index
        yield log.build_id or path.stem, stored_build_rows(store, log.to_json(), spill_in=manifest_dir(root)).rows


def rebuild_manifest(store: StoreReader) -> int:
    """Recreate the manifest from every build log and the records they name. Returns builds indexed."""
    manifest = manifest_dir(Path(store.root))
    current_schema(manifest)
    count = segments.rebuild(manifest, _all_builds(store))
    shutil.rmtree(heads_dir(manifest), ignore_errors=True)
    refresh_heads(store, manifest)
    return count


def manifest_problems(store: StoreReader) -> list[str]:
    """Files of the manifest a query would fail on (unreadable Parquet, damaged JSON), for `claw fsck`.

    The manifest is derived data: `claw fsck --repair` rebuilds it when this names anything."""
    import duckdb

    from clawstore.query import duck

    root = manifest_dir(Path(store.root))
    if not root.is_dir():
        return []
    problems = []
    con = duck.connect()
    try:
        for path in sorted(root.rglob("*")):
            if not path.is_file() or "tmp" in path.relative_to(root).parts[:1]:
                continue
            try:
                if path.suffix == ".parquet":
                    con.execute("select count(*) from read_parquet(?)", [str(path)]).fetchall()
                elif path.suffix == ".json":
                    json.loads(path.read_bytes())
            except (duckdb.Error, ValueError, OSError) as exc:
                why = str(exc).splitlines()[0][:100]
                problems.append(f"manifest file {path.relative_to(root)}: unreadable ({why})")
    finally:
        con.close()
    return problems


def repair_manifest(store: StoreReader) -> int:
    """Rebuild the manifest; if a damaged file survives the rebuild, start from nothing (it is all
    derived from build logs and records). Returns builds indexed."""
    count = rebuild_manifest(store)
    if manifest_problems(store):
        shutil.rmtree(manifest_dir(Path(store.root)), ignore_errors=True)
        count = rebuild_manifest(store)
    return count


def compact_manifest(store: StoreReader) -> bool:
    """Merge all waiting segments now (normally refresh does it once COMPACT_AT are waiting)."""
    return segments.compact(manifest_dir(Path(store.root)), wait=True, force=True)


def pending_builds(store: StoreReader) -> list[str]:
    """Finished build logs (complete, interrupted, or left by a killed build) not in the manifest."""
    directory = builds_dir(Path(store.root))
    if not directory.is_dir():
        return []
    snap = segments.snapshot(manifest_dir(Path(store.root)))
    indexed = set(snap.covers) | set(snap.segments)
    live = live_builds(store)
    return [path.stem for path in sorted(directory.glob("*.json"))
            if segments.slot_for(path.stem) not in indexed and path.stem not in live]


@contextlib.contextmanager
def _index_lock(manifest: Path) -> Iterator[None]:
    """The manifest's index lock (one indexing process at a time), the directory made if need be."""
    check_duckdb_can_open(manifest)
    manifest.mkdir(parents=True, exist_ok=True)
    with open(manifest / "index.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def index_heads(store: StoreReader, campaign: str, warn: Callable[[str], None] | None = None) -> None:
    """Materialise this campaign's current head and nothing else (`claw report`), copying unchanged rows from its
    previous head so the cost follows what changed; other campaigns wait for the next query. Cheap, and lock-free, when
    the head is on disk already. Details: docs/query.md (Details by module)."""
    manifest = manifest_dir(Path(store.root))
    current_schema(manifest)
    if stale_campaign_head(store, manifest, campaign) is None:
        return
    with _index_lock(manifest):
        refresh_campaign_head(store, manifest, campaign, warn)


def index_current(store: StoreReader, warn: Callable[[str], None] | None = None) -> None:
    """Materialise every campaign's current head (the plain views), copying unchanged rows from each previous head;
    builds finished since the last query wait for a query of the history views (`index_pending`). Cheap, and lock-free,
    when the heads are on disk already. Details: docs/query.md (Details by module)."""
    manifest = manifest_dir(Path(store.root))
    current_schema(manifest)
    if not heads_changed(store, manifest):
        return
    with _index_lock(manifest):
        refresh_heads(store, manifest, warn)


def index_pending(store: StoreReader, warn: Callable[[str], None] | None = None) -> int:
    """Index every pending build and the current campaign heads (one process at a time).

    Returns how many builds were indexed. Cheap when nothing changed: no lock is taken. A build log
    that cannot be read (truncated, not JSON) is skipped, and `warn` is told which: one damaged file
    never stops every query (`claw fsck --repair` quarantines it).
    """
    manifest = manifest_dir(Path(store.root))
    current_schema(manifest)
    if not pending_builds(store) and not heads_changed(store, manifest):
        return 0
    indexed = 0
    with _index_lock(manifest):
        todo = pending_builds(store)  # another process may have indexed them meanwhile
        segments_made: dict[str, Path] = {}
        wanted = set(wanted_heads(store).values())  # heads a campaign ref names
        covered = False
        for build_id in todo:
            try:
                built, again = _index_build(store, build_id, warn, segments_made)
            except StoreError as exc:
                if warn is not None:
                    warn(f"{exc}; left out of the query (run claw fsck --repair)")
                continue
            indexed += 1
            covered |= again
            head = built.log.get("head")
            if built.log.get("head_written") and isinstance(head, str) and head in wanted:
                # Now, while its rows are at hand (whichever build of the campaign comes last:
                # build ids of one second sort by their hex).
                materialise_head(store, manifest, head, warn, built)
        refresh_heads(store, manifest, warn)
        # Merged once, after the head (whose files may be the last build's segment's) is published.
        segments.compact(manifest, wait=covered, force=covered)
        return indexed
