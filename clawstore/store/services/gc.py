"""Garbage collection: drop what no ref reaches, never what a running build may still need.

Mark from the refs, running exports and kept entries; sweep under the gc-sweep lock, sparing what is newer than the
grace period. The rules and the races they close: docs/gc-and-archives.md (Roots and reachability; Details by module).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import TYPE_CHECKING, TypeVar

from clawstore.errors import CorruptObjectError, StoreError, UsageError
from clawstore.host import heap
from clawstore.host.durable import fsync_path
from clawstore.store.buildlogs import JournalsRead, unadopted_records, unadopted_windows
from clawstore.store.core import codec
from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.core.index import (
    ActionEntry,
    Entries,
    IndexSnapshot,
    index_lock,
    new_segment_name,
    remove_segments,
    segment_path,
    write_rows_segment,
)
from clawstore.store.core.leftovers import (
    remove_stale_downloads,
    remove_stale_temp_files,
    stale_downloads,
    stale_temp_files,
)
from clawstore.store.core.locks import (
    EXPORT_LEASE_PREFIX,
    READING_HEAD_LEASE_PREFIX,
    SWEEP_LOCK,
    LeaseInfo,
    list_leases,
    remove_stale_leases,
)
from clawstore.store.core.packfile import (
    ACTION_SIZE,
    BLOB_HEAD_SIZE,
    KIND_ACTION,
    KIND_OBJECT,
    SMALL_PACK_BYTES,
    PackWriter,
    encode_action,
    iter_pack_ids,
    new_pack_id,
    pack_overhead,
    pack_path,
    writer_alive,
)
from clawstore.store.core.runtime import TOUCH_AFTER_S, pack_full
from clawstore.store.edges import children_in, edges_path
from clawstore.store.reach import Reach
from clawstore.store.refs import iter_ref_entries
from clawstore.store.services.gc_copies import copies_a_dry_run_counts, keep_listed, listed_copies, note_copy
from clawstore.store.services.gc_kept import KeptEntries, KeptObjects

if TYPE_CHECKING:
    from clawstore.store.store import Store

DEFAULT_GRACE_S = 3600.0
GC_LOCK = "gc"  # held by a gc that deletes (a second one fails at once)
# A dry run looks whether a gc holds GC_LOCK by taking it shared for an instant (locks.held_now): a gc starting
# then waits that instant out instead of failing as if another gc ran; one that holds it still refuses the second.
GC_LOOK_S = 0.5
# A pack whose unused share is above this is rewritten (restic prune's --max-unused).
DEFAULT_MAX_UNUSED = 0.1
# Extra margin on top of TOUCH_AFTER_S for clock granularity and the time between a put and its use.
LEASE_SLACK_S = 60.0
_HEAD_LEASES = {EXPORT_LEASE_PREFIX: "export", READING_HEAD_LEASE_PREFIX: "reading"}

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, what: str = "--grace") -> float:
    """'0', '30s', '15m', '1h', '2d', '1h30m' -> seconds (UsageError naming `what` otherwise)."""
    value = text.strip().lower()
    if value == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_RE.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if not value or pos != len(value):
        raise UsageError(f"{what}: bad duration {text!r} (use e.g. 0, 30s, 15m, 1h, 2d or 1h30m)")
    return total


@dataclass
class GcReport:
    dry_run: bool
    grace_s: float
    roots: int = 0
    reachable: int = 0
    objects_seen: int = 0
    listed: bool = True  # whether `objects` and `actions` are made (the counts below always are)
    objects: list[tuple[str, int]] = field(default_factory=list)  # (id, stored bytes) deleted / to delete
    actions: list[tuple[str, str]] = field(default_factory=list)  # (key, record id) deleted / to delete
    objects_deleted: int = 0  # deleted / to delete: how many objects, their stored bytes, how many entries
    object_bytes_deleted: int = 0
    actions_deleted: int = 0
    kept_young: int = 0  # unreached objects kept because younger than the grace period
    kept_for_builds: int = 0  # unreached objects kept because a build is running
    packs_rewritten: int = 0
    packs_deleted: int = 0
    copies_deleted: int = 0  # of those, packs a killed gc copied into (locks/gc.copies): deleted whatever their age
    pack_bytes_freed: int = 0  # disk bytes of packs deleted or rewritten, less the new pack
    corrupt: list[str] = field(default_factory=list)  # objects found damaged while copying (left out)
    temp_files: int = 0
    temp_bytes: int = 0
    stale_leases: int = 0
    live_leases: list[str] = field(default_factory=list)  # purposes of the leases that made gc careful
    dangling: dict[str, str | None] = field(default_factory=dict)  # missing object -> who named it
    # Why the disk refused the plan's temporary files (then held in memory: more memory), None if it did not
    plan_in_memory: str | None = None
    seconds: float = 0.0

    def doomed(self, objects: KeptObjects) -> None:
        """The objects deleted / to delete: counted, and listed (sorted by id) when `listed`."""
        self.objects_deleted = len(objects)
        self.object_bytes_deleted = objects.stored_bytes()
        # (the list: ~190 bytes an object, 18 MB of a real gc's peak at 10,000 x 5, for a report that prints a count)
        self.objects = [(PREFIX + d.hex(), loc[2]) for d, loc in objects.sorted_items()] if self.listed else []

    def doomed_entries(self, entries: KeptEntries) -> None:
        """The entries deleted / to delete (each with a record): counted, and listed (sorted by key) when `listed`."""
        self.actions_deleted = len(entries)
        self.actions = [(PREFIX + k.hex(), PREFIX + e.record.hex()) for k, e in entries.sorted_items()
                        if e.record is not None] if self.listed else []

    @property
    def bytes_freed(self) -> int:
        return max(self.pack_bytes_freed, 0) + self.temp_bytes

    def to_json(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run, "grace_s": self.grace_s, "roots": self.roots, "reachable": self.reachable,
            "objects_seen": self.objects_seen, "objects_deleted": self.objects_deleted,
            "object_bytes_deleted": self.object_bytes_deleted,
            "actions_deleted": self.actions_deleted, "temp_files_deleted": self.temp_files,
            "bytes_freed": self.bytes_freed, "kept_young": self.kept_young,
            "kept_for_builds": self.kept_for_builds, "stale_leases_removed": self.stale_leases,
            "packs_rewritten": self.packs_rewritten, "packs_deleted": self.packs_deleted,
            "killed_gc_copies_deleted": self.copies_deleted,
            "corrupt": len(self.corrupt),
            "live_leases": self.live_leases, "dangling": len(self.dangling), "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class _Policy:
    cutoff: float  # files modified at or after this are kept (grace period; never later than gc's start)
    protect_after: float | None  # with live leases: objects modified at or after this are kept too
    copies: frozenset[str] = frozenset()  # packs a killed gc copied into (gc_copies): no grace period for them
    # action-cache entries written within one of these (from, to) epoch seconds: kept (store/buildlogs.py
    # unadopted_windows: around an untold killed build's last log write)
    entry_windows: tuple[tuple[float, float], ...] = ()

    def keeps_by_age(self, mtime: float) -> bool:
        return mtime >= self.cutoff or (self.protect_after is not None and mtime >= self.protect_after)

    def keeps_entry(self, written: float) -> bool:
        """An entry is kept by its age, or as one a killed build may have written after its log's last write (store/
        buildlogs.py unadopted_windows)."""
        return self.keeps_by_age(written) or any(low <= written <= high for low, high in self.entry_windows)

    def keeps_pack(self, pack: str, mtime: float, used: bool) -> bool:
        """Whether a pack is spared by its age. A killed gc's copy that the index names nothing in (`used` False)
        only while a build runs (its lease's window): nobody else wrote it, so the grace period has nothing to wait
        for."""
        if pack in self.copies and not used:
            return self.protect_after is not None and mtime >= self.protect_after
        return self.keeps_by_age(mtime)


def collect(store: Store, grace_s: float = DEFAULT_GRACE_S, dry_run: bool = False,
            max_unused: float = DEFAULT_MAX_UNUSED, listed: bool = True) -> GcReport:
    """Run one gc over `store` (see the module docstring). Two gcs never overlap: the second fails. Without `listed`
    the report counts what is deleted but does not list it."""
    if grace_s < 0:
        raise UsageError("--grace must not be negative")
    if not 0 <= max_unused <= 1:
        raise UsageError("--max-unused must be between 0 and 1")
    started = time.monotonic()
    report = GcReport(dry_run=dry_run, grace_s=grace_s, listed=listed)
    # A second gc fails (within GC_LOOK_S) instead of queueing behind the first (a dry run just looks).
    gc_lock = contextlib.nullcontext() if dry_run else store.exclusive(GC_LOCK, timeout=GC_LOOK_S)
    with gc_lock:
        if not dry_run:
            heap.settle()  # (big blocks unmapped when freed, few arenas: what the copy frees is not kept as heap)
            store.adopt_orphans()  # a killed build's finished work is named, not swept as garbage
            store.runtime.close_writer()  # this process's own pack becomes a candidate too
        start = time.time()
        locks, packs = store.layout.locks, store.runtime.packs_dir
        # (a dry run beside a running gc counts no list: its copies are that gc's, not yet a killed one's)
        copies = (copies_a_dry_run_counts(store.root, locks, packs, GC_LOCK) if dry_run
                  else listed_copies(locks, packs))
        reach = Reach(store, cached=True)  # packs fsck verified are walked from their edges files
        journals_read = JournalsRead()  # (a killed build's journal read once, unless it changes)
        report.roots = _mark_roots(store, reach, journals_read)
        sweep_lock = contextlib.nullcontext() if dry_run else store.exclusive(SWEEP_LOCK)
        index_held = contextlib.nullcontext() if dry_run else index_lock(store.layout.locks)
        with sweep_lock, index_held:
            # Leases are read under the sweep lock: a lease created from here on waits until the
            # sweep is over before its holder touches the store, so this view is complete.
            live = [lease for lease in list_leases(store.root) if lease.alive]
            report.live_leases = sorted(lease.purpose for lease in live)
            policy = _policy(start, grace_s, live, copies, tuple(unadopted_windows(store)))
            store.runtime.index.reload()
            # refs set while we marked, exports that began meanwhile, builds killed meanwhile (alive at the first look)
            report.roots = _mark_roots(store, reach, journals_read)
            # First as a dry run's (the kept objects counted, not held): a gc with nothing to delete or rewrite then
            # never holds the kept ones (~130 bytes an object); one with work plans again, holding them (the index is
            # locked: the same view).
            probe = GcReport(dry_run=dry_run, grace_s=grace_s, listed=listed and dry_run)
            plan = _plan(store, reach, policy, keep_all=bool(live), max_unused=max_unused, report=probe, held=False)
            report.plan_in_memory = plan.refused()
            if not dry_run and plan.has_work():
                plan.close()
                del plan, probe  # (its doomed objects released before the held plan lists them again)
                plan = _plan(store, reach, policy, keep_all=bool(live), max_unused=max_unused, report=report)
            else:
                _take_plan_counts(report, probe)
            try:
                if not dry_run:
                    if reach.mark(_roots(store).values()):  # a ref set at the last moment keeps its closure
                        plan.drop_reached(reach, report)  # (a look-up a doomed object: only when that marked any)
                    plan.recheck_ages(store, policy, report)
                    _take_reach(report, reach)
                    del reach  # (the walk's rows and look-up tables, not needed by the copy: let go before it)
                    heap.trim()  # (and given back: else the copy's peak stood on the heap they left, +20-40 MB)
                    _rewrite(store, plan, report)
                    _sweep_temp_files(store, report, policy.cutoff)
                    report.stale_leases = remove_stale_leases(store.root)
                else:
                    _take_reach(report, reach)
                    _count_temp_files(store, report, policy.cutoff)
            finally:
                report.plan_in_memory = report.plan_in_memory or plan.refused()
                plan.close()
    report.seconds = time.monotonic() - started
    return report


def _take_reach(report: GcReport, reach: Reach) -> None:
    """What the finished walk tells the report."""
    report.reachable = len(reach)
    report.dangling = {PREFIX + h: (PREFIX + p if p else None) for h, p in reach.missing.items()}


def _policy(start: float, grace_s: float, live: list[LeaseInfo], copies: frozenset[str] = frozenset(),
            entry_windows: tuple[tuple[float, float], ...] = ()) -> _Policy:
    protect_after = None
    if live:
        oldest = min(lease.started_epoch or start for lease in live)
        protect_after = oldest - TOUCH_AFTER_S - LEASE_SLACK_S
    return _Policy(cutoff=min(start, start - grace_s), protect_after=protect_after, copies=copies,
                   entry_windows=entry_windows)


def _roots(store: Store) -> dict[str, str]:
    """{why: object id} for every ref and every running export's head."""
    roots: dict[str, str] = {}
    for name, target in iter_ref_entries(store):
        if target is None:
            raise StoreError(f"ref {name} is damaged: gc cannot know what it keeps (inspect refs/{name}, "
                             "then run claw fsck)")
        roots[f"ref {name}"] = target
    for lease in list_leases(store.root):
        for prefix, why in _HEAD_LEASES.items():
            if lease.alive and lease.purpose.startswith(prefix):
                head = lease.purpose[len(prefix):].strip()
                if is_oid(head):
                    roots[f"{why} {lease.path.name}"] = head
    return roots


def _mark_roots(store: Store, reach: Reach, journals_read: JournalsRead) -> int:
    """Mark what every root reaches: the refs, the running exports' and reads' heads (`_roots`), and the records of
    killed builds no later build has adopted (store/buildlogs.py unadopted_records: streamed, not held, as many as a
    killed build finished; a journal this gc read unchanged already is not read again: `journals_read`). How many
    roots there were (the skipped journals' records not counted again)."""
    roots = _roots(store)
    reach.mark(roots.values())
    marked = len(roots)
    found = (record for _, record in unadopted_records(store, journals_read) if is_oid(record))
    while chunk := list(islice(found, UNADOPTED_AT_ONCE)):  # (a slice at a time: mark's stack holds its roots)
        reach.mark(chunk)
        marked += len(chunk)
    return marked + journals_read.skipped


UNADOPTED_AT_ONCE = 8192  # killed builds' records marked at a time (~1 MB of mark's stack)


@dataclass
class _Plan:
    view: IndexSnapshot
    objects: KeptObjects  # kept (as the new segment's rows, in a temporary file: gc_kept.py)
    actions: KeptEntries  # kept (likewise)
    doomed_objects: KeptObjects  # (as rows too: 52 bytes an object, where a dict held ~200)
    doomed_actions: KeptEntries  # (84 bytes an entry, where a dict held ~340)
    rewrite: list[str]  # packs to copy the live blobs of, then delete
    delete: list[str]  # packs nothing kept is in
    copies_spared: list[str] = field(default_factory=list)  # a killed gc's copies a running build keeps for now
    copy_bytes: int = 0  # what the copies of `rewrite`'s kept blobs take (as the packs they come from hold them)

    def refused(self) -> str | None:
        """Why the disk refused the rows' temporary files, if it did (they are then held in memory)."""
        return next((rows.refused for rows in (self.objects, self.actions, self.doomed_objects, self.doomed_actions)
                     if rows.refused), None)

    def close(self) -> None:
        """Let go of the rows' temporary files."""
        for rows in (self.objects, self.actions, self.doomed_objects, self.doomed_actions):
            rows.close()

    def has_work(self) -> bool:
        """Whether a gc from this plan would delete or rewrite anything (as `_rewrite` asks before it starts)."""
        return bool(self.rewrite or self.delete or self.doomed_objects or self.doomed_actions)

    def recheck_ages(self, store: Store, policy: _Policy, report: GcReport) -> None:
        """Right before publishing: a pack a build touched since the plan (a dedup hit) keeps all."""
        ages = _pack_ages(store)
        young = {pack for pack, mtime in ages.items() if policy.keeps_pack(pack, mtime, used=pack not in self.delete)}
        if not young:
            return
        for row, digest, loc in self.doomed_objects.items():
            if loc[0] in young:
                self.objects.add(digest, loc)
                self.doomed_objects.drop(row)
        self.rewrite = [pack for pack in self.rewrite if pack not in young]
        self.delete = [pack for pack in self.delete if pack not in young]
        report.doomed(self.doomed_objects)

    def drop_reached(self, reach: Reach, report: GcReport) -> None:
        """Objects reached since the plan (a ref set meanwhile) are kept after all; a pack the plan deleted whole that
        holds one is rewritten instead (only rewritten packs are copied from: deleted, it took a pinned object)."""
        doomed = (((row, digest, loc), digest) for row, digest, loc in self.doomed_objects.items())
        holding = set()
        for (row, digest, loc), is_reached in _reached_chunks(doomed, reach):
            if is_reached:
                self.doomed_objects.drop(row)
                self.objects.add(digest, loc)
                holding.add(loc[0])
        rewritten = [pack for pack in self.delete if pack in holding]
        if rewritten:
            self.delete = [pack for pack in self.delete if pack not in holding]
            self.rewrite += rewritten
            report.packs_deleted -= len(rewritten)
            report.packs_rewritten += len(rewritten)
        report.doomed(self.doomed_objects)


def _plan(store: Store, reach: Reach, policy: _Policy, keep_all: bool, max_unused: float,
          report: GcReport, held: bool = True) -> _Plan:
    """What to keep, delete and rewrite. Without `held` (a dry run, which rewrites nothing) the kept objects and entries
    are counted into each pack's live bytes as they stream, not held (the plan's `objects` and `actions` stay empty)."""
    # A snapshot: marking may read segments written from now on into the view; gc's new index
    # replaces exactly the segments it planned from, and the newer ones stay as they are.
    view = store.runtime.index.snapshot()
    ages = _pack_ages(store)
    kept_records: list[str] = []
    tmp_dir = store.runtime.tmp_dir
    actions, doomed_actions = KeptEntries(tmp_dir), KeptEntries(tmp_dir)
    live: dict[str, int] = {}
    action_bytes = ACTION_SIZE + BLOB_HEAD_SIZE
    # Not held, the tables' entries are counted by arrays when the walk was (those whose record is reached, per pack),
    # and only the others and the small segments' streamed
    counted = None if held else reach.tally_actions(view.entries)
    if counted is None:
        stream = _actions_reached(view, reach)
    else:
        for pack, count in counted.reached.items():
            live[pack] = live.get(pack, 0) + count * action_bytes
        stream = chain(((key, entry, False) for key, entry in counted.unreached),
                       _actions_reached(IndexSnapshot(view.loaded, Entries(actions=view.entries.actions)), reach))
    for key, entry, is_reached in stream:
        if entry.record is None:
            continue  # a removed entry: the rewritten index simply omits it
        if is_reached:  # (a kept entry is a root: its record, reached, already holds its closure)
            pass
        elif keep_all or policy.keeps_entry(entry.time_ns / 1e9):
            kept_records.append(entry.record.hex())  # a kept entry is a root: its record and outputs stay
        else:
            doomed_actions.add(key, entry)
            continue
        live[entry.pack] = live.get(entry.pack, 0) + action_bytes
        if held:
            actions.add(key, entry)
    reach.mark(kept_records)
    records = (((row, key, entry), entry.record) for row, key, entry in doomed_actions.items()
               if entry.record is not None)
    for (row, key, entry), is_reached in _reached_chunks(records, reach):
        if not is_reached:
            continue
        doomed_actions.drop(row)  # its record is reached through a kept entry's closure
        live[entry.pack] = live.get(entry.pack, 0) + action_bytes
        if held:
            actions.add(key, entry)
    report.doomed_entries(doomed_actions)
    objects, doomed = KeptObjects(tmp_dir), KeptObjects(tmp_dir)
    # Not held, the big tables' objects are counted by arrays when the walk was (the reached ones' bytes summed per
    # pack), and only the others and the small segments' streamed
    tally = None if held else reach.tally(view.entries)
    if tally is None:
        stream = reach.objects_of(view.entries)
    else:
        report.objects_seen += tally.objects - tally.unreached_count
        for pack, (count, stored) in tally.reached.items():
            live[pack] = live.get(pack, 0) + stored + count * BLOB_HEAD_SIZE
        stream = chain(((digest, loc, False) for digest, loc in tally.unreached),
                       reach.objects_of(Entries(objects=view.entries.objects)))
    for digest, loc, is_reached in stream:
        report.objects_seen += 1
        if is_reached:
            live[loc[0]] = live.get(loc[0], 0) + loc[2] + BLOB_HEAD_SIZE
            if held:
                objects.add(digest, loc)
            continue
        mtime = ages.get(loc[0])
        if mtime is None:
            continue  # its pack is gone: nothing to keep or free
        if policy.keeps_by_age(mtime):
            live[loc[0]] = live.get(loc[0], 0) + loc[2] + BLOB_HEAD_SIZE
            if held:
                objects.add(digest, loc)
            if mtime >= policy.cutoff:
                report.kept_young += 1
            else:
                report.kept_for_builds += 1
            continue
        doomed.add(digest, loc)
    report.doomed(doomed)
    rewrite, delete = [], []
    small: list[tuple[str, int, int]] = []  # (pack, its bytes that are not live blobs, its live ones)
    copy_bytes = 0
    spared: list[str] = []
    for pack, mtime in sorted(ages.items()):
        used = live.get(pack, 0)
        if policy.keeps_pack(pack, mtime, used > 0) or writer_alive(pack_path(store.runtime.packs_dir, pack)):
            if pack in policy.copies and not used:
                spared.append(pack)
            continue
        path = pack_path(store.runtime.packs_dir, pack)
        size = _pack_size(store, pack)
        if used:
            used += pack_overhead(path)
        if used == 0:
            delete.append(pack)
            report.packs_deleted += 1
            report.copies_deleted += pack in policy.copies
            report.pack_bytes_freed += size
        elif size and 1 - used / size > max_unused:
            rewrite.append(pack)
            copy_bytes += used
            report.packs_rewritten += 1
            report.pack_bytes_freed += size - used
        elif size < SMALL_PACK_BYTES:  # (several merge into one)
            small.append((pack, size - used, used))
    if len(small) > 1 or (small and rewrite):  # (one small pack alone would only be copied as it is)
        rewrite += [pack for pack, _, _ in small]
        copy_bytes += sum(used for _, _, used in small)
        report.packs_rewritten += len(small)
        report.pack_bytes_freed += sum(overhead for _, overhead, _ in small)
    return _Plan(view, objects, actions, doomed, doomed_actions, rewrite, delete, spared, copy_bytes)


# A copy's pack is also sealed once it holds this many blobs: its table is held until its seal (49 bytes a blob), and
# the seal looks its rows up by id (~100 bytes a row). Sealed at a build's limits alone, the last pack took every kept
# entry of the packs rewritten (action entries name nothing: 160,000 at 10,000 x 5), and its seal was a real gc's
# peak (+37 MB traced, growing with the store; docs/scale/gc-and-fsck.md, Session 61).
COPY_PACK_BLOBS = 65536

# Objects asked `reached` at once (one look-up by arrays for them all): a chunk of entries or doomed objects as Python
# tuples, ~500 bytes each (16,384 until session 60: a real gc's held plan peaked 6 MB higher at 10,000 x 5)
_ASKED_AT_ONCE = 4096
_Name = TypeVar("_Name")  # (what _reached_chunks names each object by)


def _actions_reached(view: IndexSnapshot, reach: Reach) -> Iterator[tuple[bytes, ActionEntry, bool]]:
    """Each action entry of the view and whether its record is reached (False for a removed entry)."""
    entries = iter(view.actions.items())
    while chunk := list(islice(entries, _ASKED_AT_ONCE)):
        answers = iter(reach.reached_many([entry.record for _, entry in chunk if entry.record is not None]))
        for key, entry in chunk:
            yield key, entry, entry.record is not None and next(answers)


def _reached_chunks(items: Iterator[tuple[_Name, bytes]], reach: Reach) -> Iterator[tuple[_Name, bool]]:
    """(name, whether the object `digest` is reached) of each (name, digest), asked _ASKED_AT_ONCE at a time (a gc
    deleting most of a store asks it of every doomed object: not all of them held twice at once)."""
    while chunk := list(islice(items, _ASKED_AT_ONCE)):
        yield from zip((name for name, _ in chunk), reach.reached_many([digest for _, digest in chunk]), strict=True)


def _take_plan_counts(report: GcReport, planned: GcReport) -> None:
    """What `_plan` counted into `planned`, into `report`."""
    for name in ("objects_seen", "objects", "actions", "objects_deleted", "object_bytes_deleted", "actions_deleted",
                 "kept_young", "kept_for_builds", "packs_rewritten",
                 "packs_deleted", "copies_deleted", "pack_bytes_freed"):
        setattr(report, name, getattr(planned, name))


def _pack_ages(store: Store) -> dict[str, float]:
    ages = {}
    for pack in iter_pack_ids(store.runtime.packs_dir):
        with contextlib.suppress(FileNotFoundError):
            ages[pack] = os.stat(pack_path(store.runtime.packs_dir, pack)).st_mtime
    return ages


def _pack_size(store: Store, pack: str) -> int:
    try:
        return os.stat(pack_path(store.runtime.packs_dir, pack)).st_size
    except FileNotFoundError:
        return 0


def _rewrite(store: Store, plan: _Plan, report: GcReport) -> None:
    """Copy live blobs out of sparse packs, publish the new index, then delete what it superseded."""
    runtime = store.runtime
    moved = set(plan.rewrite)
    if not plan.has_work():
        return
    # The plan's own rows become the new segment's, each copied object's row (or entry) rewritten in place in their
    # file: a copy of them, or a sorted list of their items, held ~100 MB more at 10,000 x 5 (docs/scale/gc-and-fsck.md,
    # Session 57). The plan is not read again after this, whether the rewrite ends or fails.
    objects, actions = plan.objects, plan.actions
    # The copies go into packs sealed at a build's limits (runtime.pack_full), each as it fills: one pack for them all
    # held its table and edge log (~50 bytes an object, 32 an edge) and its seal's arrays for every object copied.
    writers = _Writers(store)
    segment = new_segment_name()
    try:
        for row, digest, loc in objects.moved(moved):  # (in the order of their places: each pack read front to back)
            frame = runtime.pread(loc)
            oid = PREFIX + digest.hex()
            try:
                content = codec.decode_verified(oid, digest.hex(), f"pack {loc[0]}", frame)
            except CorruptObjectError as exc:  # never copy damage forward; fsck names it
                report.corrupt.append(str(exc))
                objects.drop(row)
                continue
            writer = writers.current()
            blob = writer.append(KIND_OBJECT, digest, [frame])
            if writer.edge_log is not None:  # (the new pack's edges file, written when it is sealed)
                writer.edge_log.add(digest, blob.offset, children_in(content))
            objects.move(row, (writer.pack_id, blob.offset, blob.length))
        for row, key, entry in actions.moved(moved):  # (in key order)
            writer = writers.current()
            blob = writer.append(KIND_ACTION, key, [encode_action(entry.record, entry.time_ns)])
            actions.move(row, writer.pack_id, blob.offset)
        if writers.seal():
            fsync_path(runtime.packs_dir)
        # With the segments the loaded ones replace: left behind by a merge or gc killed before it
        # removed them, they would come back into view once their replacement is gone.
        old_segments = sorted(plan.view.loaded | plan.view.superseded)
        # (read from the plan's file as the segment is written: a batch at a time)
        packs = objects.used_packs()
        named = set(packs)
        packs += [pack for pack in actions.used_packs() if pack not in named]
        slots = {pack: slot for slot, pack in enumerate(packs)}
        write_rows_segment(runtime.index_dir, runtime.tmp_dir, segment, old_segments, packs,
                           (len(objects), objects.segment_batches(slots)),
                           (len(actions), actions.segment_batches(slots)))
        remove_segments(runtime.index_dir, old_segments)
    except BaseException as exc:
        # Failed (a full disk mid-copy, say) before the new segment named the copies: nobody reads them, and left
        # for the next gc they took the room it needed to copy (on a full disk, every gc after failed alike)
        if not segment_path(runtime.index_dir, segment).exists():
            writers.close()
            with contextlib.suppress(OSError):  # (the failure is what the user must see)
                _delete_packs(store, writers.made)
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _disk_full(plan) from exc
        raise
    finally:
        writers.close()
    report.pack_bytes_freed = sum(_pack_size(store, pack) for pack in [*plan.rewrite, *plan.delete])
    report.pack_bytes_freed -= writers.written
    _delete_packs(store, [*plan.rewrite, *plan.delete])
    keep_listed(store.layout.locks, runtime.tmp_dir, plan.copies_spared)  # (this gc's copies are named now)
    runtime.index.reload()


def _disk_full(plan: _Plan) -> StoreError:
    """What a gc the full disk stopped before its index swap says: the room it needs."""
    return StoreError(f"the disk is full: gc copies the kept objects of {len(plan.rewrite)} pack(s), about "
                      f"{plan.copy_bytes / 2**20:.1f} MiB, before it deletes any; it deleted nothing")


def _delete_packs(store: Store, packs: list[str]) -> None:
    """The packs and their edges files deleted (those already gone too), durably."""
    runtime = store.runtime
    for pack in packs:
        runtime.forget_pack(pack)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pack_path(runtime.packs_dir, pack))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(edges_path(store.root, pack))
    fsync_path(runtime.packs_dir)


class _Writers:
    """The packs a rewrite copies into, one open at a time: sealed (durable, with its edges file) once full, so what a
    writer holds is bounded by the pack limits, not by the objects copied."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._open: PackWriter | None = None
        self.made: list[str] = []  # (every pack begun)
        self.written = 0  # bytes of the packs sealed so far

    def current(self) -> PackWriter:
        """The open pack, a new one when the last is full (its seal is durable before the next is begun)."""
        if self._open is not None and (pack_full(self._open) or self._open.blobs >= COPY_PACK_BLOBS):
            self.seal()
        if self._open is None:
            pack_id = new_pack_id()
            note_copy(self._store.layout.locks, pack_id)  # (a kill from here on leaves a copy the next gc knows)
            self.made.append(pack_id)
            self._open = PackWriter(self._store.runtime.packs_dir, pack_id, edges_root=self._store.root)
        return self._open

    def seal(self) -> bool:
        """Seal the open pack, if any; whether any pack was written."""
        if self._open is not None:
            writer, self._open = self._open, None
            try:
                writer.seal()
            finally:
                writer.close()
            self.written += writer.size
        return self.written > 0

    def close(self) -> None:
        if self._open is not None:
            writer, self._open = self._open, None
            writer.close()


def _count_temp_files(store: Store, report: GcReport, cutoff: float) -> None:
    """Dead writers' temp files, and the packs pulls kept that no pull took before `cutoff`."""
    for _, size in [*stale_temp_files(store), *stale_downloads(store, cutoff)]:
        report.temp_files += 1
        report.temp_bytes += size


def _sweep_temp_files(store: Store, report: GcReport, cutoff: float) -> None:
    for files, size in (remove_stale_temp_files(store), remove_stale_downloads(store, cutoff)):
        report.temp_files += files
        report.temp_bytes += size
