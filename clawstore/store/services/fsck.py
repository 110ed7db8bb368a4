"""fsck: verify every blob of every pack, the index against the packs, and what builds and queries rely on; optionally
repair it. What counts as a problem, as a notice, and what --repair does: docs/store.md (fsck)."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import blake3
import msgspec

from clawstore.errors import StoreError
from clawstore.host import heap
from clawstore.host.durable import fsync_path, write_file_atomic
from clawstore.store import edges
from clawstore.store.actions import entry_problem, key_digest, set_entries
from clawstore.store.buildlogs import builds_dir
from clawstore.store.core.edgefile import EdgeLog
from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.core.index import (
    ActionEntry,
    BadSegmentError,
    Entries,
    Loc,
    Segment,
    index_lock,
    list_segments,
    merge_action,
    new_segment_name,
    open_table,
    remove_segments,
    write_segment,
)
from clawstore.store.core.leftovers import count_temp_files, remove_leftovers
from clawstore.store.core.locks import list_leases
from clawstore.store.core.packfile import (
    KIND_OBJECT,
    Blob,
    NotAPackError,
    PackScan,
    PackWriter,
    decode_action,
    iter_pack_ids,
    pack_path,
    scan_pack,
    scanned_table,
    table_rows,
    walk_pack,
    writer_alive,
)
from clawstore.store.headdoc import inline_or_none, is_parted, iter_nodes, iter_parts, part_ids, write_head
from clawstore.store.refs import RefConflict, iter_ref_entries
from clawstore.store.services.fsck_beside import FromTheEnd, Once, PackHelper
from clawstore.store.services.fsck_keys import IndexKeys, by_keys
from clawstore.store.services.fsck_logs import build_log_problem
from clawstore.store.services.fsck_reach import CHUNK, TRIMMED, PackFiles, Reach
from clawstore.store.services.fsck_rows import RowCheck
from clawstore.store.services.fsck_spill import PackRows
from clawstore.store.services.gc import GC_LOCK
from clawstore.store.services.gc_copies import copies_a_dry_run_counts, listed_copies

if TYPE_CHECKING:
    from clawstore.store.store import Store

CAMPAIGN_PREFIX = "campaigns/"


@dataclass
class FsckReport:
    objects: int = 0
    packs: int = 0
    corrupt: dict[str, str] = field(default_factory=dict)  # oid -> message naming it
    bad_packs: dict[str, str] = field(default_factory=dict)  # pack id -> reason
    bad_index: list[str] = field(default_factory=list)  # damaged segments, entries the packs do not hold
    torn_packs: int = 0  # unfinished tails of killed writers (not a problem)
    actions: int = 0
    bad_actions: dict[str, str] = field(default_factory=dict)  # key -> reason
    refs: int = 0
    bad_refs: dict[str, str] = field(default_factory=dict)  # name -> reason (target missing/corrupt)
    bad_head_nodes: dict[str, dict[int, str]] = field(default_factory=dict)  # ref -> {node index: reason}
    build_logs: int = 0
    bad_build_logs: dict[str, str] = field(default_factory=dict)  # file name -> reason
    ref_targets: dict[str, str] = field(default_factory=dict)  # name -> target, as checked
    temp_files: int = 0
    stale_temp_files: int = 0
    stale_leases: int = 0
    stray_files: list[str] = field(default_factory=list)
    unindexed_packs: dict[str, int] = field(default_factory=dict)  # pack -> bytes: no index segment names it
    unindexed_copies: int = 0  # of those, a killed gc's copies (locks/gc.copies)
    repaired: list[str] = field(default_factory=list)
    did_repair: bool = False
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        """Everything found wrong (before any repair)."""
        return (
            list(self.corrupt.values())
            + [f"pack {pack}: {why}" for pack, why in self.bad_packs.items()]
            + [f"index: {why}" for why in self.bad_index]
            + [f"action-cache entry {key}: {why}" for key, why in self.bad_actions.items()]
            + [f"ref {name}: {why}" for name, why in self.bad_refs.items()]
            + [f"ref {name}: {why}" for name, nodes in self.bad_head_nodes.items() for why in nodes.values()]
            + [f"build log builds/{name}: {why}" for name, why in self.bad_build_logs.items()]
        )

    @property
    def unresolved(self) -> list[str]:
        """Problems still present: all of them, or after a repair those of refs it leaves to a human
        (pins: `claw unpin NAME`)."""
        if not self.did_repair:
            return self.problems
        return [f"ref {name}: {why}" for name, why in self.bad_refs.items() if not repairable_ref(name)] + [
            f"ref {name}: {why}" for name, nodes in self.bad_head_nodes.items() if not repairable_ref(name)
            for why in nodes.values()]

    @property
    def clean(self) -> bool:
        return not self.unresolved


def repairable_ref(name: str) -> bool:
    """Campaign heads are the build's own bookkeeping: repair rewrites them. Pins are a user's
    decision: repair reports them (claw unpin), never changes them."""
    return name.startswith(CAMPAIGN_PREFIX)


# An index entry: object digest, offset, length (the blob it names, as `_BLOB` packs a pack's), its segment's place
_INDEX_ROW = struct.Struct("<32sQQI")
_BLOB = struct.Struct("<32sQQ")
# What names a record (grouped by the record's pack): the record's digest and offset, 0 and the entry's key digest, or
# 1 and a head node's ref (its place among the refs) and index
_RECORD_ROW = struct.Struct("<32sQB32s")
_NODE = struct.Struct("<II")
_OFFSET = struct.Struct("<Q")
# An index entry or segment found wrong: (segment's number, digest, why, the entry's pack and offset; None: a segment)
_Unmatched = tuple[int, bytes, str, "tuple[str, int] | None"]
# Blocks this big mapped on their own and unmapped when freed (a region and its decoded batches, a pack's table, an
# edges file's arrays): else glibc's threshold rises to the largest block freed, and a pack's big blocks came from the
# heap and stayed under the next one's peak. Not smaller: blocks from 128 KiB up mapped and faulted in anew each
# time cost the later fsck ~+20 % CPU (sys)
MAPPED = 2 << 20
LOCATED = 16384  # records the grouping looks up in the index at once (their rows held meanwhile: ~2 MB)


@dataclass
class _Packs:
    """What the pass over the packs keeps (a few bytes a pack): the digest of each pack whose edges file this run
    trusts or wrote (it is not hashed again to be read), and where each pack's damaged blobs are."""

    digests: dict[str, bytes] = field(default_factory=dict)
    damaged: dict[str, set[int]] = field(default_factory=dict)  # pack -> payload offsets of blobs that do not verify


def fsck(store: Store, repair: bool = False, progress: Callable[[int], None] | None = None, beside: bool = False
         ) -> FsckReport:
    """`beside`: verify packs on a second core too, by a forked helper (fsck_beside): only in the `claw` program."""
    heap.settle(MAPPED)
    try:
        with _scratch(store, repair):
            return _fsck(store, repair, progress, beside)
    finally:
        heap.settle()  # (MAPPED is fsck's: what runs next in this process maps from MMAP_THRESHOLD, as build and gc)


@contextlib.contextmanager
def _scratch(store: Store, repair: bool) -> Iterator[None]:
    """A check of a store it may not write (a shared store mounted read-only) spills into a scratch directory of the
    system's instead of the store's tmp/ (there, it failed: `tmp/fsck-…: Read-only file system`, before session 73);
    the edges files it would save are a cache, skipped."""
    tmp_dir = store.runtime.tmp_dir
    if repair or os.access(tmp_dir, os.W_OK):
        yield
        return
    from clawstore.host.scratch import scratch_dir

    with scratch_dir("claw-fsck-") as scratch:
        store.runtime.tmp_dir = Path(scratch)
        try:
            yield
        finally:
            store.runtime.tmp_dir = tmp_dir


def _fsck(store: Store, repair: bool, progress: Callable[[int], None] | None, beside: bool) -> FsckReport:
    started = time.monotonic()
    report = FsckReport()
    held = index_lock(store.layout.locks) if repair else contextlib.nullcontext(True)
    if repair:
        store.runtime.close_writer()  # this process's own pack may be one repair moves aside
    with held, PackRows(store.runtime.tmp_dir) as records, contextlib.ExitStack() as ending:
        # Listed before the packs are read: every blob these segments name is in a pack by then,
        # so a rebuild may replace them; segments written meanwhile stay as they are.
        segments = list_segments(store.runtime.index_dir)
        grouped: list[_Grouped] = []
        helpers: list[_GroupedBeside] = []

        def group(beside_packs: bool = False) -> None:  # (while the packs are verified, by a helper of its own or
            # for an index looked up by its rows here; else after the packs, and after a repair's rebuild, which
            # moves records)
            store.runtime.index.reload()
            if beside_packs and beside and (helper := _GroupedBeside(store, records)).forked:
                helpers.append(helper)
                ending.callback(helper.close)  # (an error meanwhile: the helper ended, not left grouping)
                return
            if beside_packs and by_keys(store.runtime.index.snapshot().entries):
                return  # (numpy and the keys not held beside the packs' verification: the first fsck's peak)
            grouped.append(_group_records(store, records))
            heap.trim()  # (what the look-ups and the heads' parts freed, given back)

        packs = _check_packs(store, report, progress, segments, beside, None if repair else partial(group, True))
        if repair and (report.bad_packs or report.bad_index or report.corrupt):
            _rebuild_index(store, report, packs, segments)
        grouped += [taken for helper in helpers if (taken := helper.take()) is not None]
        if not grouped:
            group()
        entries, refs, added, objects = grouped[0]
        index = IndexKeys(entries)  # (its keys made again: the grouping's dropped with it)
        report.objects = objects if objects is not None else len(store.runtime.index.objects)
        reach = Reach(store, report.corrupt, PackFiles(store, packs.digests, index.find), index.find,
                      index if index.by_keys else None)
        heads = _check_refs(store, report, reach, refs, added)
        _check_records(store, report, reach, records, heads, beside)
        del reach, index
    heap.trim()  # (the records' look-ups and edges files, given back before the build logs and the manifest's check)
    _check_build_logs(store, report)
    report.temp_files, report.stale_temp_files = count_temp_files(store)
    report.stale_leases = sum(1 for lease_info in list_leases(store.root) if not lease_info.alive)
    if repair:
        _repair(store, report)
    report.seconds = time.monotonic() - started
    return report


def _table(path: Path) -> PackScan:
    """A pack's blobs: its table, or for a pack whose table is damaged what a walk of it finds (NotAPackError
    is kept for the caller, FileNotFoundError raised)."""
    try:
        return scan_pack(path)
    except NotAPackError:
        return walk_pack(path)


def _check_packs(store: Store, report: FsckReport, progress: Callable[[int], None] | None,
                 segments: list[str], beside: bool, meanwhile: Callable[[], None] | None = None) -> _Packs:
    """Verify every blob (but those of packs an edges file vouches for), a pack at a time, and check the index's
    entries of each pack against its table while it is in hand (they are grouped by pack first: fsck_spill); with
    `beside`, a forked helper verifies the last packs meanwhile (fsck_beside)."""
    packs_dir = store.runtime.packs_dir
    known = sorted(set(iter_pack_ids(packs_dir)))
    report.stray_files += [str(packs_dir / name) for name in sorted(os.listdir(packs_dir))
                           if name[:-len(".pack")] not in known]
    found = _Packs()
    unmatched: list[_Unmatched] = []  # decided once all damage is known
    named: set[str] = set()  # the packs the segments name
    counted = [0]
    holding = False
    store.runtime.index.reload()  # (as the records' grouping does next: what decides how the index is looked up)
    helper = PackHelper(store.root, packs_dir, store.runtime.tmp_dir, known, beside,
                        arrays=by_keys(store.runtime.index.snapshot().entries))
    paced = heap.Paced(TRIMMED)  # (the pack's blobs and contents given back: else the next pack's stood on them)
    with contextlib.closing(helper), PackRows(store.runtime.tmp_dir) as rows:
        if meanwhile is not None:
            meanwhile()  # (the helper verifies the last packs meanwhile)
        _group_index(store, segments, rows, unmatched, named)
        for number, pack in enumerate(known):
            helped = PackHelper.digest(helper.before(number))
            path = pack_path(packs_dir, pack)
            report.packs += 1
            table, digest = _verified_table(store, pack, path, found, helped)
            if table is not None:  # (verified before, unchanged: its rows are matched, no blob made)
                table_held = table_rows(table)
                counted[0] += len(table_held)
                if progress is not None:
                    progress(counted[0])
                holding = holding or bool(table_held)
                _match(pack, set(table_held), set(), rows.take(pack), segments, unmatched)
                let_go = len(table_held)
                del table, table_held
                paced.let_go(let_go)
                continue
            try:
                scan = scan_pack(path)
            except NotAPackError as exc:
                report.bad_packs[pack] = str(exc)
                scan = walk_pack(path)
            except FileNotFoundError:
                continue  # (its entries are matched against nothing below)
            if scan.torn_at is not None and not scan.sealed and not writer_alive(path):
                report.torn_packs += 1  # (a live writer's tail is not indexed yet)
            try:
                damaged = _verify_pack(store, report, pack, path, scan, found, progress, counted, digest)
            except FileNotFoundError:
                continue  # (a gc deleted it since its scan: as one gone before it)
            holding = holding or len(scan.blobs) > len(damaged)
            _match(pack, _rows_of(scan.blobs), damaged, rows.take(pack), segments, unmatched)
            let_go = len(scan.blobs)
            del scan
            paced.let_go(let_go)
        for pack in sorted(rows.packs()):  # packs gone, or never there
            _match(pack, set(), set(), rows.take(pack), segments, unmatched)
    _drop_taken_out(store, segments, unmatched)
    edges.remove_stale(store.root, packs_dir)
    if segments and not unmatched:  # (beside a damaged or lost index, repair's rebuild names them: not gc's to take)
        _count_unindexed(store, known, named, segments, report)
    _keep_intact_copies(packs_dir, known, found, report)
    if not segments and holding:
        report.bad_index.append(f"the index is empty but {report.packs} pack(s) hold blobs (it was lost)")
    for _, digest, why, _ in sorted(unmatched, key=itemgetter(0, 1, 2)):
        if not digest or PREFIX + digest.hex() not in report.corrupt:  # (a corrupt object is named as that)
            report.bad_index.append(why)
    return found


def _verified_table(store: Store, pack: str, path: Path, found: _Packs, helped: bytes | None = None
                    ) -> tuple[bytes | None, bytes | None]:
    """(the table of a sealed pack, checked as `scan_pack` checks it, if its edges file says an earlier fsck verified
    it and it still hashes the same, else None: it is then read as before, `_verify_pack`; the pack's digest if it was
    hashed, else None). `helped`: the digest the packs' helper hashed the pack to before it verified every blob of it
    and wrote its file (fsck_beside): taken as this side's own hash and load would be, neither done again (the
    file is checked against it when the records' check loads it)."""
    try:
        table = scanned_table(path)
        if table is None or writer_alive(path):
            return None, None
        if helped is not None:
            found.digests[pack] = helped
            return table, helped
        digest = edges.pack_digest(path)
    except (NotAPackError, OSError):
        return None, None
    cached = edges.load(store.root, store.runtime.packs_dir, pack, digest, verified=True)
    if cached is None or not cached.verified:
        return None, digest
    found.digests[pack] = digest
    return table, digest


def _verify_pack(store: Store, report: FsckReport, pack: str, path: Path, scan: PackScan, found: _Packs,
                 progress: Callable[[int], None] | None, counted: list[int], hashed: bytes | None = None) -> set[int]:
    """Verify a pack's blobs unless its edges file says an earlier fsck did and the pack still hashes the same; write
    that file when every blob verified. Returns the offsets of the blobs that do not verify. `hashed`: the pack's
    digest when `_verified_table` hashed it and found no verified file (neither is done again)."""
    sealed = scan.sealed and not writer_alive(path)
    # Hashed before it is verified: bytes changed later no longer match what the file records.
    if hashed is not None and sealed and pack not in report.bad_packs:
        digest, cached = hashed, None
    else:
        digest = edges.pack_digest(path) if sealed and pack not in report.bad_packs else None
        cached = edges.load(store.root, store.runtime.packs_dir, pack, digest, verified=True) if digest is not None \
            else None
    if digest is not None and cached is not None and cached.verified:
        found.digests[pack] = digest
        counted[0] += len(scan.blobs)
        if progress is not None:
            progress(counted[0])
        return set()
    del cached
    damaged: set[int] = set()
    named = EdgeLog()
    with open(path, "rb") as fh:
        for checked, bad in edges.verify_noting(fh, pack, scan.blobs, named, facts=True):
            for blob, reason in bad:
                report.corrupt[PREFIX + blob.id.hex()] = reason
                report.bad_packs.setdefault(pack, "holds damaged blobs")
                damaged.add(blob.offset)
            before, counted[0] = counted[0], counted[0] + checked
            if progress is not None and counted[0] // 1000 != before // 1000:  # (a run at a time)
                progress(counted[0])
    if digest is not None and pack not in report.bad_packs:
        if edges.save(store.root, store.runtime.tmp_dir, scan, pack, digest, named, verified=True) is not None:
            found.digests[pack] = digest
    if damaged:
        found.damaged[pack] = damaged
    return damaged


def _group_index(store: Store, segments: list[str], rows: PackRows, unmatched: list[_Unmatched],
                 named: set[str]) -> None:
    """Every segment must read back whole; its object entries go to their pack's group, the packs it names (objects'
    and entries') to `named`."""
    index_dir, row = store.runtime.index_dir, _INDEX_ROW.pack
    for number, name in enumerate(segments):
        try:
            segment = open_table(index_dir, name)  # (its rows streamed, not loaded into a dict)
            segment.check()
        except FileNotFoundError:
            continue  # merged meanwhile: the merge holds the same entries
        except (BadSegmentError, OSError) as exc:
            unmatched.append((number, b"", str(exc), None))
            continue
        named.update(segment.packs)
        for digest, (pack, offset, length) in segment.iter_objects():
            rows.add(pack, row(digest, offset, length, number))


def _count_unindexed(store: Store, known: list[str], named: set[str], segments: list[str], report: FsckReport) -> None:
    """Packs no segment names and no live writer or gc at work holds: what a killed gc copied (or a killed writer
    left) before an index named it, disk that only `claw gc` gives back. Segments written since the listing (a build
    that sealed a pack and named it meanwhile) are read for their packs' names first."""
    index_dir, packs_dir = store.runtime.index_dir, store.runtime.packs_dir
    for name in sorted(set(list_segments(index_dir)) - set(segments)):
        with contextlib.suppress(FileNotFoundError, BadSegmentError, OSError):
            named.update(open_table(index_dir, name, verify=False).packs)
    copies = listed_copies(store.layout.locks, packs_dir)
    # (a gc at work lists its copies before it makes them: they are its work, named by its index soon, not disk lost)
    running = copies_a_dry_run_counts(store.root, store.layout.locks, packs_dir, GC_LOCK) != copies
    for pack in known:
        path = pack_path(packs_dir, pack)
        if pack in named or writer_alive(path) or (running and pack in copies):
            continue
        with contextlib.suppress(FileNotFoundError):
            report.unindexed_packs[pack] = path.stat().st_size
            report.unindexed_copies += pack in copies


def _rows_of(blobs: list[Blob]) -> set[bytes]:
    """The blobs' (id, offset, length) as a table's rows hold them (packfile.table_rows)."""
    return set(map(_BLOB.pack, map(itemgetter(1), blobs), map(itemgetter(2), blobs), map(itemgetter(3), blobs)))


def _match(pack: str, held: set[bytes], damaged: set[int], rows: list[bytes], segments: list[str],
           unmatched: list[_Unmatched]) -> None:
    """The index's entries of one pack must name blobs it holds (`held`: their rows) intact."""
    if not rows:
        return
    for row in rows:
        if row[:_BLOB.size] in held and not damaged:
            continue
        digest, offset, length, number = _INDEX_ROW.unpack(row)
        if row[:_BLOB.size] not in held or offset in damaged:
            unmatched.append((number, digest, f"segment {segments[number]} puts object {PREFIX + digest.hex()} at "
                                              f"pack {pack} offset {offset}, where the pack does not hold it intact",
                              (pack, offset)))


def _drop_taken_out(store: Store, segments: list[str], unmatched: list[_Unmatched]) -> None:
    """Leave out the entries a gc took out of the index meanwhile: read from a segment it replaced, of a pack it then
    deleted (the segment gone now, and the index not putting the object there). Beside such a gc every entry of the
    deleted pack was named as not held (test_fsck_keys_beside.py)."""
    if not any(place is not None for *_, place in unmatched):
        return
    now = set(list_segments(store.runtime.index_dir))
    store.runtime.index.reload()

    def taken_out(number: int, digest: bytes, place: tuple[str, int] | None) -> bool:
        if place is None or segments[number] in now:
            return False
        loc = store.runtime.index.find_object(digest, look_again=False)
        return loc is None or (loc[0], loc[1]) != place

    unmatched[:] = [row for row in unmatched if not taken_out(row[0], row[1], row[3])]


def _keep_intact_copies(packs_dir: Path, known: list[str], found: _Packs, report: FsckReport) -> None:
    """An object damaged in one pack but intact in another (a copy) is not lost (the tables are read again: only
    when something is damaged)."""
    wanted = {bytes.fromhex(oid[len(PREFIX):]) for oid in report.corrupt}
    for pack in known if wanted else ():
        try:
            blobs = _table(pack_path(packs_dir, pack)).blobs
        except FileNotFoundError:
            continue
        damaged = found.damaged.get(pack, set())
        for blob in blobs:
            if blob.kind == KIND_OBJECT and blob.id in wanted and blob.offset not in damaged:
                report.corrupt.pop(PREFIX + blob.id.hex(), None)


def _rebuild_index(store: Store, report: FsckReport, packs: _Packs, segments: list[str]) -> None:
    """Copy the good blobs out of bad packs, quarantine those packs, write an index read from the packs (every
    pack's table read again; the new segment holds every entry)."""
    runtime = store.runtime
    stamp = time.strftime("%Y%m%dT%H%M%S")

    def good(pack: str) -> list[Blob]:
        try:
            blobs = _table(pack_path(runtime.packs_dir, pack)).blobs
        except FileNotFoundError:
            return []
        damaged = packs.damaged.get(pack, set())
        return [blob for blob in blobs if blob.offset not in damaged]

    rescued: PackWriter | None = None
    copies: list[Blob] = []
    try:
        for pack in sorted(report.bad_packs):
            with open(pack_path(runtime.packs_dir, pack), "rb") as fh:
                for blob in good(pack):
                    rescued = rescued or PackWriter(runtime.packs_dir)
                    payload = os.pread(fh.fileno(), blob.length, blob.offset)
                    copies.append(rescued.append(blob.kind, blob.id, [payload]))
        if rescued is not None:
            rescued.seal()
            fsync_path(runtime.packs_dir)
    except FileNotFoundError:
        pass
    finally:
        if rescued is not None:
            rescued.close()
    objects: dict[bytes, Loc] = {}
    actions: dict[bytes, ActionEntry] = {}
    kept = sorted(set(iter_pack_ids(runtime.packs_dir)) - set(report.bad_packs))
    for pack in kept:
        blobs = copies if rescued is not None and pack == rescued.pack_id else good(pack)
        with open(pack_path(runtime.packs_dir, pack), "rb") as fh:
            for blob in blobs:
                if blob.kind == KIND_OBJECT:
                    objects.setdefault(blob.id, (pack, blob.offset, blob.length))
                else:
                    record, time_ns = decode_action(os.pread(fh.fileno(), blob.length, blob.offset))
                    merge_action(actions, blob.id, ActionEntry(record, time_ns, pack, blob.offset))
    write_segment(runtime.index_dir, runtime.tmp_dir,
                  Segment(new_segment_name(), replaces=segments, objects=objects, actions=actions))
    remove_segments(runtime.index_dir, segments)
    for oid in sorted(report.corrupt):
        report.repaired.append(f"quarantined corrupt object {oid} (its pack went to quarantine/, good blobs kept)")
    for pack in sorted(report.bad_packs):
        runtime.forget_pack(pack)
        if writer_alive(pack_path(runtime.packs_dir, pack)):
            report.repaired.append(f"left damaged pack {pack} in place: a live process still writes it "
                                   "(the index no longer names its bad blobs; run fsck --repair again later)")
            continue
        with contextlib.suppress(FileNotFoundError):
            os.rename(pack_path(runtime.packs_dir, pack), store.layout.quarantine / f"{pack}.pack.{stamp}")
            report.repaired.append(f"moved damaged pack {pack} to quarantine/ (its good blobs were kept)")
    fsync_path(runtime.packs_dir)
    report.repaired.append(f"rebuilt the index from the packs ({len(objects)} objects, "
                           f"{sum(1 for e in actions.values() if e.record)} action-cache entries)")


class _Grouped(NamedTuple):
    """The records' rows grouped (in fsck's PackRows): the index's entries they were located in (the records' step
    looks up the same), the refs read, and the campaign heads whose nodes were added (by their number among the refs).
    """

    entries: Entries
    refs: list[tuple[str, str | None]]
    added: dict[int, object]
    objects: int | None = None  # the index's objects, counted by the grouping's helper (else by fsck, after it)


class _GroupedBeside:
    """The records' grouping done by a helper forked before the packs are verified (fsck_beside.Once), into this
    process's PackRows' file; its answer says where the runs are, the refs it read and the heads whose nodes it added.
    `take()` returns None where there is no answer, or one that does not account for exactly the file it wrote
    (its runs not tiling it, a run's count not its length, the file not hashing as the helper hashed it): fsck then
    groups them itself, after the packs."""

    def __init__(self, store: Store, rows: PackRows):
        self._store, self._rows = store, rows
        self._entries = store.runtime.index.snapshot().entries  # (the helper's: the records' step looks up the same)
        file = rows.opened()

        def work() -> bytes:
            own = PackRows(store.runtime.tmp_dir, file=file)
            done = _group_records(store, own)
            runs, end = own.spilled()
            return json.dumps({"runs": runs, "end": end, "digest": _rows_digest(file, end), "refs": done.refs,
                               "added": sorted(done.added), "objects": len(store.runtime.index.objects)}).encode()

        self._helper = Once(work, fork=True)
        self.forked = self._helper.forked

    def take(self) -> _Grouped | None:
        answer = self._helper.answer()  # (the helper ended: nothing more is written to the file)
        if answer is None:
            return None
        try:
            said = json.loads(answer)
            runs = [(str(pack), int(offset), int(length)) for pack, offset, length in said["runs"]]
            end, digest = int(said["end"]), str(said["digest"])
            refs = [(str(name), None if target is None else str(target)) for name, target in said["refs"]]
            numbers = [int(number) for number in said["added"]]
            objects = int(said["objects"])  # (a stream of every object of the index: ~0.3 s at 10,000 x 5)
        except (ValueError, TypeError, KeyError):
            return None
        if not all(target is None or is_oid(target) for _, target in refs):  # (as iter_ref_entries gives them)
            return None
        file = self._rows.opened()
        at = 0
        for _, offset, length in runs:  # (each run where the last ended, its count its length: whole rows)
            head = os.pread(file, 4, offset) if offset == at and length > 4 else b""
            count = int.from_bytes(head, "little") if len(head) == 4 else 0
            if not count or 4 + count * _RECORD_ROW.size != length:
                return None
            at += length
        if at != end or _rows_digest(file, end) != digest or not all(0 <= n < len(refs) for n in numbers):
            return None
        added = {number: _read_json(self._store, target) for number in numbers if (target := refs[number][1])}
        if len(added) != len(numbers):
            return None
        self._rows.adopt(runs, end)
        return _Grouped(self._entries, refs, added, objects if objects >= 0 else None)

    def close(self) -> None:
        self._helper.close()


def _rows_digest(file: int, end: int) -> str:
    """The BLAKE3 of a file's first `end` bytes (what the grouping's helper wrote, as it and fsck read it)."""
    hasher, at = blake3.blake3(), 0
    while at < end:
        chunk = os.pread(file, min(1 << 20, end - at), at)
        if not chunk:
            break
        hasher.update(chunk)
        at += len(chunk)
    return hasher.hexdigest() if at == end else ""


def _group_records(store: Store, rows: PackRows) -> _Grouped:
    """The records that action-cache entries and campaign heads' nodes name, into `rows` by the record's pack (with
    what names each). Needs only the index: run while the packs are verified (by a helper of its own in the `claw`
    program; else here when it is looked up by its rows), after them when by its keys (a head's nodes are judged only
    if its ref is sound: _check_refs, once the packs are checked)."""
    entries = store.runtime.index.snapshot().entries
    index = IndexKeys(entries)
    waiting: list[tuple[bytes, int, bytes]] = []  # (by keys: looked up LOCATED at a time, in bulk; else each alone)
    batch = LOCATED if index.by_keys else 1

    def place() -> None:
        for (record, tag, rest), loc in zip(waiting, index.find_many([record for record, _, _ in waiting]),
                                            strict=True):  # (what the index lacks: a group of its own)
            rows.add(loc[0] if loc is not None else "", _RECORD_ROW.pack(record, loc[1] if loc else 0, tag, rest))
        waiting.clear()

    def add(record: bytes, tag: int, rest: bytes) -> None:
        waiting.append((record, tag, rest))
        if len(waiting) >= batch:
            place()

    for key, entry in store.runtime.index.actions.items():  # (in key order; removed entries name no record)
        if entry.record is not None:
            add(entry.record, 0, key)
    refs = list(iter_ref_entries(store))
    added: dict[int, object] = {}
    for number, (_, target) in enumerate(refs):
        head = _read_json(store, target) if target is not None else None  # (None: missing or damaged)
        if _add_nodes(store, head, number, add):
            added[number] = head
    place()
    return _Grouped(entries, refs, added)


def _check_records(store: Store, report: FsckReport, reach: Reach, rows: PackRows,
                   heads: dict[int, tuple[str, object]], beside: bool = False) -> None:
    """The action-cache entries and the campaign heads' nodes, by the records they name: these are grouped by the
    record's pack (fsck_spill, _group_records), and each group checked with that pack's edges file in hand, a record
    once however many entries and nodes name it. `beside`: a forked helper checks groups from the last one back
    meanwhile (fsck_beside.FromTheEnd). `heads`: the sound campaign heads whose nodes are judged."""
    bad_nodes: dict[int, dict[int, str]] = {}

    def checked(pack: str) -> bytes:  # (a group checked by the helper, its findings its answer)
        part = FsckReport()
        nodes: dict[int, dict[int, str]] = {}
        _check_group(store, part, reach, pack, rows.take(pack), nodes)
        return json.dumps([part.actions, part.bad_actions, nodes]).encode()

    packs = sorted(rows.packs())
    paced = heap.Paced(TRIMMED)  # (the groups' rows and records given back: else the next group's stood on them)
    with contextlib.closing(FromTheEnd(packs, checked, beside)) as helper:
        for number, pack in enumerate(packs):
            if not _helped(report, bad_nodes, helper.before(number)):
                group = rows.take(pack)
                _check_group(store, report, reach, pack, group, bad_nodes)
                let_go = len(group)
                del group
                paced.let_go(let_go)
    report.bad_actions = dict(sorted(report.bad_actions.items()))
    for number, (name, head) in heads.items():
        if bad_nodes.get(number):  # (a node of a ref found unsound was checked too: its verdict is dropped)
            report.bad_head_nodes[name] = _label_nodes(store, head, bad_nodes[number])


def _helped(report: FsckReport, bad_nodes: dict[int, dict[int, str]], answer: bytes | None) -> bool:
    """Add what the helper found of a group (False: it did not check it, or its answer does not read: check it here)."""
    if answer is None:
        return False
    try:
        actions, bad_actions, nodes = json.loads(answer)
        found = [(int(ref), {int(node): str(why) for node, why in bad.items()}) for ref, bad in nodes.items()]
        bad_actions = {str(key): str(why) for key, why in bad_actions.items()}
        actions = int(actions)
    except (ValueError, TypeError, AttributeError):
        return False
    report.actions += actions
    report.bad_actions.update(bad_actions)
    for ref, bad in found:
        bad_nodes.setdefault(ref, {}).update(bad)
    return True


def _check_group(store: Store, report: FsckReport, reach: Reach, pack: str, rows: list[bytes],
                 bad_nodes: dict[int, dict[int, str]]) -> None:
    """Check the records of one group, CHUNK at a time, and judge the entries and nodes that name them: first by rows
    of the pack's verified edges file (fsck_rows), then what that cannot vouch for the long way."""
    rows.sort()  # (by record: the rows naming one record are together)
    rows = _quick(report, reach.rows, pack, rows) if pack else rows
    start = 0
    while start < len(rows):
        end, distinct = start, 0
        while end < len(rows) and (distinct < CHUNK or rows[end][:32] == rows[end - 1][:32]):
            distinct += end == start or rows[end][:32] != rows[end - 1][:32]
            end += 1
        chunk = [(PREFIX + record.hex(), offset, tag, rest)
                 for record, offset, tag, rest in map(_RECORD_ROW.unpack, rows[start:end])]
        whole = reach.check((record_id for record_id, _, _, _ in chunk),
                            {record_id: (pack, offset) for record_id, offset, _, _ in chunk} if pack else None)
        for record_id, _, tag, rest in chunk:
            why = reach.records[record_id]
            if tag:
                if why is not None:
                    ref, node = _NODE.unpack_from(rest)
                    bad_nodes.setdefault(ref, {})[node] = why
                continue
            key = PREFIX + rest.hex()
            report.actions += 1
            if why is None:  # the entry must verify against its input document (actions.entry_problem):
                # one moved to another key, or pointing at a record of another question, would serve a
                # wrong answer to every build (every object was hashed with the packs: only looked up)
                found = whole[record_id] if record_id in whole else _read_json(store, record_id)
                why = entry_problem(key, found, lambda oid: reach.object_problem(oid) is None)
            if why is not None:
                report.bad_actions[key] = why
        start = end


def _quick(report: FsckReport, check: RowCheck, pack: str, rows: list[bytes]) -> list[bytes]:
    """Judge the rows whose record, input document and outputs a verified edges file vouches for; return the rest (a
    record this cannot vouch for, an entry whose record is for another key: named by the long way)."""
    rest: list[bytes] = []
    keep, record, offset_of = rest.append, check.record, _OFFSET.unpack_from  # (400,000 rows at 10,000 x 5)
    last, verdict, actions = b"", None, 0
    for row in rows:
        if row[:32] != last:
            last = row[:32]
            verdict = record(pack, last, offset_of(row, 32)[0])
        if verdict is None:
            keep(row)
        elif not row[40]:  # (an entry: its key's, and that key's input document there; a node: its record alone)
            if verdict[0] == row[41:73] and verdict[1]:
                actions += 1
            else:
                keep(row)
    report.actions += actions
    return rest


def _check_refs(store: Store, report: FsckReport, reach: Reach, refs: list[tuple[str, str | None]],
                added: dict[int, object]) -> dict[int, tuple[str, object]]:
    """Check each ref's target (and a campaign head's parts). Returns {number: (name, head)} of the sound refs whose
    nodes were added to the records' rows (`added`: by _group_records), to be judged with the records."""
    heads: dict[int, tuple[str, object]] = {}
    for number, (name, target) in enumerate(refs):
        report.refs += 1
        if target is None:
            report.bad_refs[name] = "ref file is damaged"
            continue
        report.ref_targets[name] = target
        problem = reach.object_problem(target)
        head = (added[number] if number in added else _read_json(store, target)) if problem is None else None
        problem = problem or _parts_problem(reach, head)
        if problem is not None:
            report.bad_refs[name] = f"target {target} {problem}"
            continue
        if number in added:
            heads[number] = (name, head)
    return heads


def _parts_problem(reach: Reach, head: object) -> str | None:
    """Why a campaign head's nodes cannot all be read: a part of it missing or corrupt (headdoc.py)."""
    for part_id in part_ids(head):
        problem = reach.object_problem(part_id)
        if problem is not None:
            return f"names part {part_id}, which {problem}"
    return None


def _add_nodes(store: Store, head: object, number: int, add: Callable[[bytes, int, bytes], None]) -> bool:
    """Add the records of a campaign head's nodes (a ref's target, read), a part at a time; False if it is not a
    campaign head (the ref's target alone is what it names) or a part is not one (the ref check names that)."""
    if not (is_parted(head) or isinstance(head, dict) and isinstance(head.get("nodes"), list)):
        return False
    try:
        if is_parted(head):  # (a part's nodes read as their records alone: kind and address only name a bad node)
            records: Iterable[Any] = chain.from_iterable(
                iter_parts(head, lambda part: _read_records(store, part), _as_is))
        else:
            records = (node.get("record") if isinstance(node, dict) else None for node in iter_nodes(head, _no_part))
        for index, record in enumerate(records):
            if is_oid(record):
                add(bytes.fromhex(record[len(PREFIX):]), 1, _NODE.pack(number, index))
    except StoreError:
        return False  # (the nodes added before it are checked, their verdicts dropped)
    return True


def _label_nodes(store: Store, head: object, bad: dict[int, str]) -> dict[int, str]:
    """{node index: why}, each named by its kind and address (the head read again: only when a node is bad)."""
    named: dict[int, str] = {}
    for index, node in enumerate(iter_nodes(head, lambda part: _read_part(store, part))):
        if index in bad:
            where = node.get("address") or {}
            label = "/".join(str(v) for v in where.values()) if isinstance(where, dict) else "?"
            named[index] = f"node {node.get('kind')} {label}: {bad[index]}"
    return named


def _read_json(store: Store, oid: str) -> object:
    try:
        return store.get_json(oid)
    except (ValueError, StoreError):
        return None


class _Node(msgspec.Struct):
    """What a head check reads of a node (the rest of it, its record_doc above all, is skipped unmade)."""

    kind: Any = None
    address: Any = None
    record: Any = None


class _Part(msgspec.Struct):
    nodes: list[_Node]


_PART = msgspec.json.Decoder(_Part)


def _read_part(store: Store, oid: str) -> object:
    """A part of a campaign head with each node's kind, address and record only (a part that is not objects in a
    list of nodes is read whole, and judged as before)."""
    try:
        part = _PART.decode(store.get_bytes(oid))
    except (ValueError, StoreError):
        return _read_json(store, oid)
    return {"nodes": [{"kind": node.kind, "address": node.address, "record": node.record} for node in part.nodes]}


class _Record(msgspec.Struct):
    record: Any = None


class _Records(msgspec.Struct):
    nodes: list[_Record]


_RECORDS = msgspec.json.Decoder(_Records)


def _read_records(store: Store, oid: str) -> object:
    """A part of a campaign head with each node as its record alone (None for a node that is not an object): what
    adding its nodes reads, 200,000 at 10,000 x 5 (a part that is not a list of nodes is read whole and judged)."""
    try:
        return {"nodes": [node.record for node in _RECORDS.decode(store.get_bytes(oid)).nodes]}
    except (ValueError, StoreError):
        part = _read_json(store, oid)
    nodes = part.get("nodes") if isinstance(part, dict) else None
    if not isinstance(nodes, list):
        return part
    return {"nodes": [node.get("record") if isinstance(node, dict) else None for node in nodes]}


def _as_is(node: object, _action: object) -> object:
    return node


def _no_part(part_id: str) -> object:
    raise AssertionError(part_id)  # (a head with its nodes inline reads no part)


def _read_head(store: Store, oid: str) -> object:
    """A campaign head with its nodes inline (any other JSON as it is; None if a part is unreadable)."""
    return inline_or_none(_read_json(store, oid), lambda part: _read_json(store, part))


def _check_build_logs(store: Store, report: FsckReport) -> None:
    """Each builds/*.json must be a build log a query can index (a truncated one breaks every query)."""
    directory = builds_dir(store.root)
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        report.build_logs += 1
        why = build_log_problem(path)
        if why is not None:
            report.bad_build_logs[path.name] = why


def _repair(store: Store, report: FsckReport) -> None:
    quarantine = store.layout.quarantine
    quarantine.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    if report.bad_actions:
        listing = dict(sorted(report.bad_actions.items()))
        write_file_atomic(quarantine / f"actions.{stamp}.json", json.dumps(listing, indent=1).encode(), store.tmp_dir)
        set_entries(store, {key_digest(key): (None, time.time_ns()) for key in report.bad_actions})
        for key in report.bad_actions:
            report.repaired.append(f"quarantined action-cache entry {key} (it will be rebuilt)")
    for name in report.bad_build_logs:
        with contextlib.suppress(FileNotFoundError):
            os.rename(builds_dir(store.root) / name, quarantine / f"build-{name}.{stamp}")
            report.repaired.append(f"quarantined build log builds/{name} (queries index the others)")
    if report.bad_build_logs:
        fsync_path(quarantine)
    _repair_refs(store, report)
    removed_files, removed_journals, removed_leases = remove_leftovers(store)
    if removed_files:
        report.repaired.append(f"removed {removed_files} stale temp file(s)")
    if removed_journals:
        report.repaired.append(f"removed {removed_journals} journal(s) of builds killed before their first log "
                               "(nothing was paid)")
    if removed_leases:
        report.repaired.append(f"removed {removed_leases} stale lease(s)")
    report.did_repair = True


def _repair_refs(store: Store, report: FsckReport) -> None:
    """Refs whose head is gone are removed; heads drop the nodes whose record or outputs are gone.
    Compare-and-set: a ref a build moved meanwhile is left to the next fsck."""
    for name in (name for name in report.bad_refs if repairable_ref(name)):
        target = report.ref_targets.get(name)
        if target is None:
            path = store.layout.refs / name
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, store.layout.quarantine / f"ref-{name.replace('/', '__')}")
                report.repaired.append(f"quarantined damaged ref file {name}")
            continue
        with contextlib.suppress(RefConflict):
            if store.delete_ref(name, expected=target):
                report.repaired.append(f"removed ref {name} (its head {target} is gone; the next build "
                                       "plans from the action cache)")
    heads = [(name, bad) for name, bad in report.bad_head_nodes.items() if repairable_ref(name)]
    if not heads:
        return
    # Each head written again is kept from a gc until its ref names it, by a lease (as a build's): before session 77
    # a `claw gc --grace 0` meanwhile deleted it, written before gc began and named by nothing, and the repair failed
    # ("cannot set ref campaigns/…: object … is not in the store"; tests/gc/test_writers_beside_gc.py).
    with store.lease("fsck --repair"):
        for name, bad in heads:
            head_id = report.ref_targets[name]
            head = _read_head(store, head_id)
            if not isinstance(head, dict) or not isinstance(head.get("nodes"), list):
                continue
            nodes = [node if index not in bad else _quarantined_node(node, bad[index])
                     for index, node in enumerate(head["nodes"])]
            with contextlib.suppress(RefConflict):
                store.set_ref(name, write_head(store, head, nodes), expected=head_id)
                report.repaired.append(f"ref {name}: {len(bad)} node(s) whose record or outputs are gone no longer "
                                       "name them (the next build rebuilds them)")


def _quarantined_node(node: dict[str, object], why: str) -> dict[str, object]:
    """A head node that keeps its address and key (so `claw explain` can say what happened) but names
    no record: nothing reuses it, gc and export do not follow it."""
    return {**node, "record": None, "record_doc": None, "quarantined": why}
