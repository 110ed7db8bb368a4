"""Garbage collection: delete what no ref reaches, never what a running build may still need.

Mark: the roots are every ref (campaign heads, pins), the head of every running archive export, and
every action-cache entry gc keeps; the closure follows object ids written in JSON objects
(clawstore/store/reach.py). Kept action-cache entries: those whose record is reached, those younger
than the grace period and, while any build holds a lease, all of them.

Sweep (under the `gc-sweep` lock; a new lease waits for it, see locks.lease): first the action-cache
entries not kept (pointers go before what they point at), then unreached objects older than the grace
period, then temp files of dead writers and stale leases. Each deletion re-checks the file right
before it: an entry must still name the same record, every file must still be older than the cutoff.

While a build runs (a live lease, start L) gc is conservative: it keeps every action-cache entry and
its closure, and every object modified after L - TOUCH_AFTER_S (a build that re-puts an existing
object refreshes its mtime only when it is older than TOUCH_AFTER_S). Build logs (`builds/`) and the
manifest are never touched: they are history, and the manifest tolerates records gc removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clawstore.errors import StoreError, UsageError
from clawstore.store.durable import sync_filesystem
from clawstore.store.ids import PREFIX, is_oid
from clawstore.store.leftovers import remove_stale_temp_files, stale_temp_files
from clawstore.store.locks import SWEEP_LOCK, LeaseInfo, list_leases, remove_stale_leases
from clawstore.store.objects import TOUCH_AFTER_S
from clawstore.store.reach import Reach
from clawstore.store.refs import iter_ref_entries

if TYPE_CHECKING:
    from clawstore.store.store import Store

DEFAULT_GRACE_S = 3600.0
# Extra margin on top of TOUCH_AFTER_S for clock granularity and the time between a put and its use.
LEASE_SLACK_S = 60.0
# A lease whose purpose is this + a head id keeps that head (an archive export reading it).
EXPORT_LEASE_PREFIX = "archive-export "
_REFS_RECHECK_S = 0.5  # how often the sweep re-reads the refs to mark newly referenced objects
_DELETE_THREADS = 8

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
    objects: list[tuple[str, int]] = field(default_factory=list)  # (id, stored bytes) deleted / to delete
    actions: list[tuple[str, str]] = field(default_factory=list)  # (key, record id) deleted / to delete
    kept_young: int = 0  # unreached objects kept because younger than the grace period
    kept_for_builds: int = 0  # unreached objects kept because a build is running
    temp_files: int = 0
    temp_bytes: int = 0
    stale_leases: int = 0
    live_leases: list[str] = field(default_factory=list)  # purposes of the leases that made gc careful
    dangling: dict[str, str | None] = field(default_factory=dict)  # missing object -> who named it
    seconds: float = 0.0

    @property
    def bytes_freed(self) -> int:
        return sum(size for _, size in self.objects) + self.temp_bytes

    def to_json(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run, "grace_s": self.grace_s, "roots": self.roots, "reachable": self.reachable,
            "objects_seen": self.objects_seen, "objects_deleted": len(self.objects),
            "object_bytes_deleted": sum(size for _, size in self.objects),
            "actions_deleted": len(self.actions), "temp_files_deleted": self.temp_files,
            "bytes_freed": self.bytes_freed, "kept_young": self.kept_young,
            "kept_for_builds": self.kept_for_builds, "stale_leases_removed": self.stale_leases,
            "live_leases": self.live_leases, "dangling": len(self.dangling), "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class _Policy:
    cutoff: float  # files modified at or after this are kept (grace period; never later than gc's start)
    protect_after: float | None  # with live leases: objects modified at or after this are kept too

    def keeps_by_age(self, mtime: float) -> bool:
        return mtime >= self.cutoff or (self.protect_after is not None and mtime >= self.protect_after)


def collect(store: Store, grace_s: float = DEFAULT_GRACE_S, dry_run: bool = False) -> GcReport:
    """Run one gc over `store` (see the module docstring). Two gcs never overlap: the second fails."""
    if grace_s < 0:
        raise UsageError("--grace must not be negative")
    started = time.monotonic()
    report = GcReport(dry_run=dry_run, grace_s=grace_s)
    # A second gc fails at once instead of queueing behind the first (a dry run just looks).
    gc_lock = contextlib.nullcontext() if dry_run else store.exclusive("gc", timeout=0.0)
    with gc_lock:
        start = time.time()
        reach = Reach(store)
        roots = _roots(store)
        report.roots = len(roots)
        reach.mark(roots.values())
        sweep_lock = contextlib.nullcontext() if dry_run else store.exclusive(SWEEP_LOCK)
        with sweep_lock:
            # Leases are read under the sweep lock: a lease created from here on waits until the
            # sweep is over before its holder touches the store, so this view is complete.
            live = [lease for lease in list_leases(store.root) if lease.alive]
            report.live_leases = sorted(lease.purpose for lease in live)
            policy = _policy(start, grace_s, live)
            roots = _roots(store)  # refs set while we marked, and exports that began meanwhile
            report.roots = len(roots)
            reach.mark(roots.values())
            doomed_actions = _plan_actions(store, reach, policy, keep_all=bool(live))
            if dry_run:
                report.actions.extend(doomed_actions)
            else:
                by_shard: dict[str, list[tuple[str, str]]] = {}
                for action in doomed_actions:
                    by_shard.setdefault(action[0][len(PREFIX):len(PREFIX) + 2], []).append(action)
                with ThreadPoolExecutor(_DELETE_THREADS) as pool:
                    for done in pool.map(lambda group: [a for a in group if _delete_action(store, *a, policy)],
                                         by_shard.values()):
                        report.actions.extend(done)
            _sweep_objects(store, reach, policy, report, dry_run)
            if not dry_run:
                _sweep_temp_files(store, report)
                report.stale_leases = remove_stale_leases(store.root)
                with contextlib.suppress(OSError):
                    sync_filesystem(store.root)  # deletions durable together (a lost one is only garbage)
            else:
                _count_temp_files(store, report)
        report.reachable = len(reach.marked)
        report.dangling = {PREFIX + h: (PREFIX + p if p else None) for h, p in reach.missing.items()}
    report.seconds = time.monotonic() - started
    return report


def _policy(start: float, grace_s: float, live: list[LeaseInfo]) -> _Policy:
    protect_after = None
    if live:
        oldest = min(lease.started_epoch or start for lease in live)
        protect_after = oldest - TOUCH_AFTER_S - LEASE_SLACK_S
    return _Policy(cutoff=min(start, start - grace_s), protect_after=protect_after)


def _roots(store: Store) -> dict[str, str]:
    """{why: object id} for every ref and every running export's head."""
    roots: dict[str, str] = {}
    for name, target in iter_ref_entries(store):
        if target is None:
            raise StoreError(f"ref {name} is damaged: gc cannot know what it keeps (inspect refs/{name}, "
                             "then run claw fsck)")
        roots[f"ref {name}"] = target
    for lease in list_leases(store.root):
        if lease.alive and lease.purpose.startswith(EXPORT_LEASE_PREFIX):
            head = lease.purpose[len(EXPORT_LEASE_PREFIX):].strip()
            if is_oid(head):
                roots[f"export {lease.path.name}"] = head
    return roots


def _plan_actions(store: Store, reach: Reach, policy: _Policy, keep_all: bool) -> list[tuple[str, str]]:
    """Action-cache entries to delete; marks the closure of every entry that is kept."""
    doomed: list[tuple[str, str]] = []
    kept_records: list[str] = []
    for key, record_id in store.iter_actions():
        if record_id is None:
            continue  # a damaged entry: fsck reports and repairs it, gc leaves it alone
        if keep_all or record_id[len(PREFIX):] in reach:
            kept_records.append(record_id)
            continue
        try:
            mtime = os.stat(_entry_path(store, key)).st_mtime
        except FileNotFoundError:
            continue
        if policy.keeps_by_age(mtime):
            kept_records.append(record_id)  # a recent entry is a root: its record and outputs stay
        else:
            doomed.append((key, record_id))
    reach.mark(kept_records)
    # An entry whose record is now reached through a kept entry's closure stays too.
    return [(key, rid) for key, rid in doomed if rid[len(PREFIX):] not in reach]


def _delete_action(store: Store, key: str, record_id: str, policy: _Policy) -> bool:
    path = _entry_path(store, key)
    try:
        with open(path, "rb") as fh:
            current = fh.read().decode("ascii").strip()
            mtime = os.fstat(fh.fileno()).st_mtime
    except (FileNotFoundError, UnicodeDecodeError):
        return False
    if current != record_id or policy.keeps_by_age(mtime):
        return False  # rewritten since we looked: someone uses it
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _sweep_objects(store: Store, reach: Reach, policy: _Policy, report: GcReport, dry_run: bool) -> None:
    """Unreached, old-enough objects go; each shard's deletions are one task of a small thread pool
    (on a journaling filesystem every unlink costs a metadata write; several directories at once
    overlap well)."""
    last_refs = time.monotonic()
    pending: deque[Future[list[tuple[str, int]]]] = deque()
    with ThreadPoolExecutor(_DELETE_THREADS) as pool:
        for shard in _shards(store):
            candidates: list[tuple[str, str, int]] = []
            for oid in shard:
                report.objects_seen += 1
                if oid[len(PREFIX):] in reach:
                    continue
                path = os.path.join(store.objects_dir, oid[len(PREFIX):len(PREFIX) + 2], oid[len(PREFIX) + 2:])
                try:
                    info = os.stat(path)
                except FileNotFoundError:
                    continue
                if policy.keeps_by_age(info.st_mtime):
                    if info.st_mtime >= policy.cutoff:
                        report.kept_young += 1
                    else:
                        report.kept_for_builds += 1
                    continue
                candidates.append((oid, path, info.st_size))
            if not candidates:
                continue
            if dry_run:
                report.objects.extend((oid, size) for oid, _, size in candidates)
                continue
            if time.monotonic() - last_refs > _REFS_RECHECK_S:
                reach.mark(_roots(store).values())  # a ref set meanwhile (claw pin, an import) keeps its closure
                last_refs = time.monotonic()
                candidates = [c for c in candidates if c[0][len(PREFIX):] not in reach]
            pending.append(pool.submit(_unlink_shard, candidates, policy))
            while len(pending) > 2 * _DELETE_THREADS:  # bounded: the refs re-check must stay ahead
                report.objects.extend(pending.popleft().result())
        for future in pending:
            report.objects.extend(future.result())


def _unlink_shard(candidates: list[tuple[str, str, int]], policy: _Policy) -> list[tuple[str, int]]:
    """Delete one shard's candidates (one thread per directory: unlinks in the same directory queue on
    its lock, unlinks in different directories overlap)."""
    return [(oid, size) for oid, path, size in candidates if _unlink_if_old(path, policy)]


def _shards(store: Store) -> Iterator[list[str]]:
    """The store's object ids, grouped by shard directory."""
    current: list[str] = []
    prefix = ""
    for oid in store.iter_objects():
        head = oid[len(PREFIX):len(PREFIX) + 2]
        if head != prefix and current:
            yield current
            current = []
        prefix = head
        current.append(oid)
    if current:
        yield current


def _unlink_if_old(path: str, policy: _Policy) -> bool:
    """Delete `path` unless it was modified (re-put) since the plan; the re-check is the last step."""
    try:
        if policy.keeps_by_age(os.stat(path).st_mtime):
            return False
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _entry_path(store: Store, key: str) -> str:
    hexdigest = key[len(PREFIX):]
    return os.path.join(store.root, "ac", hexdigest[:2], hexdigest)


def _count_temp_files(store: Store, report: GcReport) -> None:
    for _, size in stale_temp_files(store):
        report.temp_files += 1
        report.temp_bytes += size


def _sweep_temp_files(store: Store, report: GcReport) -> None:
    files, size = remove_stale_temp_files(store)
    report.temp_files += files
    report.temp_bytes += size
