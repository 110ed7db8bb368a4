"""fsck: verify every blob of every pack, the index against the packs, and what builds and queries rely on; optionally
repair it. What counts as a problem, as a notice, and what --repair does: docs/store.md (fsck)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from clawstore.errors import StoreError
from clawstore.host.durable import fsync_path, write_file_atomic
from clawstore.store import edges
from clawstore.store.actions import entry_problem, key_digest, set_entries
from clawstore.store.buildlogs import builds_dir
from clawstore.store.core.edgefile import EdgeLog
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.index import (
    ActionEntry,
    BadSegmentError,
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
    walk_pack,
    writer_alive,
)
from clawstore.store.documents import read_build_log_doc
from clawstore.store.headdoc import inline_or_none, is_parted, iter_nodes, part_ids, write_head
from clawstore.store.refs import RefConflict, iter_ref_entries
from clawstore.store.services.fsck_reach import CHUNK, Reach

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


@dataclass
class _PackCheck:
    scan: PackScan
    good: list[Blob]  # blobs that verified


def fsck(store: Store, repair: bool = False, progress: Callable[[int], None] | None = None) -> FsckReport:
    started = time.monotonic()
    report = FsckReport()
    held = index_lock(store.layout.locks) if repair else contextlib.nullcontext(True)
    if repair:
        store.runtime.close_writer()  # this process's own pack may be one repair moves aside
    with held:
        # Listed before the packs are read: every blob these segments name is in a pack by then,
        # so a rebuild may replace them; segments written meanwhile stay as they are.
        segments = list_segments(store.runtime.index_dir)
        named = edges.EdgeCache(store.root, store.runtime.packs_dir, store.runtime.index)
        checks = _check_packs(store, report, progress, named)
        _check_index(store, report, checks, segments)
        if repair and (report.bad_packs or report.bad_index or report.corrupt):
            _rebuild_index(store, report, checks, segments)
        store.runtime.index.reload()
        report.objects = len(store.runtime.index.objects)
        reach = Reach(store, report.corrupt, named)  # (a record named by entries and heads is checked once)
        _check_actions(store, report, reach)
        _check_refs(store, report, reach)
    _check_build_logs(store, report)
    report.temp_files, report.stale_temp_files = count_temp_files(store)
    report.stale_leases = sum(1 for lease_info in list_leases(store.root) if not lease_info.alive)
    if repair:
        _repair(store, report)
    report.seconds = time.monotonic() - started
    return report


def _check_packs(store: Store, report: FsckReport, progress: Callable[[int], None] | None,
                 named_by: edges.EdgeCache) -> dict[str, _PackCheck]:
    """Verify every blob (but those of packs an edges file vouches for); `named_by` learns what each object names."""
    checks: dict[str, _PackCheck] = {}
    packs_dir = store.runtime.packs_dir
    known = set(iter_pack_ids(packs_dir))
    report.stray_files += [str(packs_dir / name) for name in sorted(os.listdir(packs_dir))
                           if name[:-len(".pack")] not in known]
    verified = 0
    for pack in sorted(known):
        path = pack_path(packs_dir, pack)
        report.packs += 1
        try:
            scan = scan_pack(path)
        except NotAPackError as exc:
            report.bad_packs[pack] = str(exc)
            scan = walk_pack(path)
        except FileNotFoundError:
            continue
        if scan.torn_at is not None:
            if writer_alive(path):
                pass  # being written: its tail is not indexed yet
            elif not scan.sealed:
                report.torn_packs += 1
        cached = edges.load(store.root, packs_dir, pack) if scan.sealed and pack not in report.bad_packs else None
        if cached is not None and cached.verified:  # every blob verified by an earlier fsck, the pack's bytes the same
            checks[pack] = _PackCheck(scan, list(scan.blobs))
            named_by.add(cached)
            verified += len(scan.blobs)
            if progress is not None:
                progress(verified)
            continue
        good: list[Blob] = []
        named = EdgeLog()
        # Hashed before it is verified: bytes changed later no longer match what the cache records.
        digest = edges.pack_digest(path) if scan.sealed and not writer_alive(path) else None
        with open(path, "rb") as fh:
            for blob, reason, children, fact in edges.verify_blobs(fh, pack, scan.blobs, facts=True):
                if reason is None:
                    good.append(blob)
                    if children is not None:
                        named.add(blob.id, blob.offset, children, fact)
                else:
                    report.corrupt[PREFIX + blob.id.hex()] = reason
                    report.bad_packs.setdefault(pack, "holds damaged blobs")
                verified += 1
                if progress is not None and verified % 1000 == 0:
                    progress(verified)
            if digest is not None and pack not in report.bad_packs:
                found = edges.save(store.root, store.runtime.tmp_dir, scan, pack, digest, named, verified=True)
                if found is not None:
                    named_by.add(found)
        checks[pack] = _PackCheck(scan, good)
    edges.remove_stale(store.root, packs_dir)
    # An object damaged in one pack but intact in another (a copy) is not lost.
    intact = {blob.id for check in checks.values() for blob in check.good if blob.kind == KIND_OBJECT}
    for oid in [oid for oid in report.corrupt if bytes.fromhex(oid[len(PREFIX):]) in intact]:
        del report.corrupt[oid]
    return checks


def _check_index(store: Store, report: FsckReport, checks: dict[str, _PackCheck], names: list[str]) -> None:
    """Every segment must read back whole, and name only blobs the packs hold intact."""
    index_dir = store.runtime.index_dir
    # Each pack's good blobs by offset, found by bisection: 8 bytes a blob, not a dict entry keyed by a tuple
    good = {pack: sorted(check.good, key=lambda blob: blob.offset) for pack, check in checks.items()}
    offsets = {pack: array("Q", (blob.offset for blob in blobs)) for pack, blobs in good.items()}

    def where(pack: str, offset: int) -> Blob | None:
        blobs = good.get(pack)
        if not blobs:
            return None
        pos = bisect_left(offsets[pack], offset)
        return blobs[pos] if pos < len(blobs) and blobs[pos].offset == offset else None

    if not names and any(check.good for check in checks.values()):
        report.bad_index.append(f"the index is empty but {len(checks)} pack(s) hold blobs (it was lost)")
    for name in names:
        try:
            segment = open_table(index_dir, name)  # (its rows streamed, not loaded into a dict)
            segment.check()
        except FileNotFoundError:
            continue  # merged meanwhile: the merge holds the same entries
        except (BadSegmentError, OSError) as exc:
            report.bad_index.append(str(exc))
            continue
        for digest, (pack, offset, length) in segment.iter_objects():
            blob = where(pack, offset)
            if blob is None or blob.id != digest or blob.length != length:
                oid = PREFIX + digest.hex()
                if oid not in report.corrupt:
                    report.bad_index.append(f"segment {name} puts object {oid} at pack {pack} offset {offset}, "
                                            "where the pack does not hold it intact")


def _rebuild_index(store: Store, report: FsckReport, checks: dict[str, _PackCheck], segments: list[str]) -> None:
    """Copy the good blobs out of bad packs, quarantine those packs, write an index read from the packs."""
    runtime = store.runtime
    stamp = time.strftime("%Y%m%dT%H%M%S")
    rescued: PackWriter | None = None
    try:
        for pack in sorted(report.bad_packs):
            check = checks.get(pack)
            if check is None:
                continue
            with open(pack_path(runtime.packs_dir, pack), "rb") as fh:
                for blob in check.good:
                    rescued = rescued or PackWriter(runtime.packs_dir)
                    payload = os.pread(fh.fileno(), blob.length, blob.offset)
                    copy = rescued.append(blob.kind, blob.id, [payload])
                    copy_check = checks.setdefault(rescued.pack_id, _PackCheck(PackScan([], True, 0), []))
                    copy_check.good.append(copy)
        if rescued is not None:
            rescued.seal()
            fsync_path(runtime.packs_dir)
    finally:
        if rescued is not None:
            rescued.close()
    objects: dict[bytes, Loc] = {}
    actions: dict[bytes, ActionEntry] = {}
    for pack, check in sorted(checks.items()):
        if pack in report.bad_packs:
            continue
        with open(pack_path(runtime.packs_dir, pack), "rb") as fh:
            for blob in check.good:
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


def _check_actions(store: Store, report: FsckReport, reach: Reach) -> None:
    entries = sorted(store.iter_actions(), key=lambda entry: _where(store, entry[1]))
    for start in range(0, len(entries), CHUNK):
        chunk = entries[start:start + CHUNK]
        records = reach.check(record_id for _, record_id in chunk if record_id is not None)
        for key, record_id in chunk:
            report.actions += 1
            why = "entry file is damaged" if record_id is None else reach.records[record_id]
            if why is None:  # the entry must verify against its input document (actions.entry_problem):
                # one moved to another key, or pointing at a record of another question, would serve a
                # wrong answer to every build (every object was hashed with the packs: only looked up)
                record = records[record_id] if record_id in records else _read_json(store, record_id)
                why = entry_problem(key, record, lambda oid: reach.object_problem(oid) is None)
            if why is not None:
                report.bad_actions[key] = why
    report.bad_actions = dict(sorted(report.bad_actions.items()))


def _where(store: Store, oid: str | None) -> tuple[str, int]:
    """Where an object is stored: records read in this order are read a region of a pack at a time (their
    outputs were written just before them), not scattered over every pack in each chunk."""
    loc = store.runtime.index.find_object(bytes.fromhex(oid[len(PREFIX):]), look_again=False) if oid else None
    return (loc[0], loc[1]) if loc is not None else ("", 0)


def _check_refs(store: Store, report: FsckReport, reach: Reach) -> None:
    for name, target in iter_ref_entries(store):
        report.refs += 1
        if target is None:
            report.bad_refs[name] = "ref file is damaged"
            continue
        report.ref_targets[name] = target
        problem = reach.object_problem(target)
        head = _read_json(store, target) if problem is None else None
        problem = problem or _parts_problem(reach, head)
        if problem is not None:
            report.bad_refs[name] = f"target {target} {problem}"
            continue
        bad = _head_problems(store, head, reach)
        if bad:
            report.bad_head_nodes[name] = bad


def _parts_problem(reach: Reach, head: object) -> str | None:
    """Why a campaign head's nodes cannot all be read: a part of it missing or corrupt (headdoc.py)."""
    for part_id in part_ids(head):
        problem = reach.object_problem(part_id)
        if problem is not None:
            return f"names part {part_id}, which {problem}"
    return None


def _head_problems(store: Store, target: object, reach: Reach) -> dict[int, str]:
    """{node index: why} for the nodes of a campaign head (a ref's target, read) whose record or outputs
    are gone."""
    if not (is_parted(target) or isinstance(target, dict) and isinstance(target.get("nodes"), list)):
        return {}  # not a campaign head: the ref's target alone is what it names
    bad: dict[int, str] = {}
    chunk: list[tuple[int, dict[str, Any], str]] = []
    try:  # a part at a time, CHUNK nodes checked at once: the head's nodes are never all held
        for index, node in enumerate(iter_nodes(target, lambda part: _read_part(store, part))):
            if isinstance(node, dict) and isinstance(node.get("record"), str):
                chunk.append((index, node, node["record"]))
            if len(chunk) == CHUNK:
                _check_nodes(chunk, reach, bad)
                chunk = []
    except StoreError:
        return {}  # a part that is not one: named by the ref check, its nodes cannot be read
    _check_nodes(chunk, reach, bad)
    return bad


def _check_nodes(chunk: list[tuple[int, dict[str, Any], str]], reach: Reach, bad: dict[int, str]) -> None:
    reach.check(record_id for _, _, record_id in chunk)
    for index, node, record_id in chunk:
        why = reach.records[record_id]
        if why is not None:
            where = node.get("address") or {}
            label = "/".join(str(v) for v in where.values()) if isinstance(where, dict) else "?"
            bad[index] = f"node {node.get('kind')} {label}: {why}"


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


def build_log_problem(path: Path) -> str | None:
    """Why `path` is not a readable build log (None if it is one)."""
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"unreadable ({type(exc).__name__}: {str(exc)[:80]})"
    try:
        read_build_log_doc(doc, path.name)
    except StoreError as exc:
        return str(exc).removeprefix(f"{path.name}: ")
    return None


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
    removed_files, removed_leases = remove_leftovers(store)
    if removed_files:
        report.repaired.append(f"removed {removed_files} stale temp file(s)")
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
    for name, bad in report.bad_head_nodes.items():
        if not repairable_ref(name):
            continue
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
