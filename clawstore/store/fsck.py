"""fsck: verify what builds and queries rely on; optionally repair it.

Problems (make `claw fsck` exit 1): a corrupt object; an action-cache entry that is damaged or whose
record (or one of the record's outputs, or a file of an output tree) is missing or corrupt; a ref
whose target is missing or corrupt; a node of a campaign head (or pin) whose record or outputs are
missing or corrupt; a build log that is not a readable build log; a missing shard folder. Not
problems: temp files (a live writer's, or leftovers of killed writers), stale leases, stray files.

Repair leaves a store every command can use: corrupt objects, bad action-cache entries and bad build
logs go to `quarantine/`; head nodes whose record or outputs are gone stop naming them (they are
marked `quarantined`, so `claw explain` says why they rebuild); a campaign ref whose head is gone is
removed (the next build plans from the action cache); pins are reported, never changed (claw unpin);
missing shard folders are recreated; stale temp files and stale leases are removed. The next build
rebuilds exactly the nodes that lost something.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import CorruptObjectError, MissingObjectError, StoreError
from clawstore.store import codec
from clawstore.store.actions import entry_path, output_ids
from clawstore.store.buildlogs import builds_dir, check_build_log
from clawstore.store.durable import fsync_path
from clawstore.store.ids import PREFIX, is_hex64, oid_hex
from clawstore.store.layout import SHARDS
from clawstore.store.leftovers import count_temp_files, remove_leftovers
from clawstore.store.locks import list_leases
from clawstore.store.refs import RefConflict, iter_ref_entries
from clawstore.store.trees import NotATreeError, read_tree

if TYPE_CHECKING:
    from clawstore.store.store import Store

CAMPAIGN_PREFIX = "campaigns/"
_SMALL = 4 << 20  # objects up to this stored size are verified in memory, larger ones streamed


@dataclass
class FsckReport:
    objects: int = 0
    corrupt: dict[str, str] = field(default_factory=dict)  # oid -> message naming it
    actions: int = 0
    bad_actions: dict[str, str] = field(default_factory=dict)  # key -> reason
    refs: int = 0
    bad_refs: dict[str, str] = field(default_factory=dict)  # name -> reason (target missing/corrupt)
    bad_head_nodes: dict[str, dict[int, str]] = field(default_factory=dict)  # ref -> {node index: reason}
    build_logs: int = 0
    bad_build_logs: dict[str, str] = field(default_factory=dict)  # file name -> reason
    missing_shards: list[str] = field(default_factory=list)  # e.g. objects/3a
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
            + [f"action-cache entry {key}: {why}" for key, why in self.bad_actions.items()]
            + [f"ref {name}: {why}" for name, why in self.bad_refs.items()]
            + [f"ref {name}: {why}" for name, nodes in self.bad_head_nodes.items() for why in nodes.values()]
            + [f"build log builds/{name}: {why}" for name, why in self.bad_build_logs.items()]
            + [f"shard folder {shard} is missing (every write to it would fail)" for shard in self.missing_shards]
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

    @property
    def clean(self) -> bool:
        return not self.unresolved


def fsck(store: Store, repair: bool = False, progress: Callable[[int], None] | None = None) -> FsckReport:
    started = time.monotonic()
    report = FsckReport()
    _check_shards(store, report)
    _check_objects(store, report, progress)
    _check_actions(store, report)
    _check_refs(store, report)
    _check_build_logs(store, report)
    report.temp_files, report.stale_temp_files = count_temp_files(store)
    report.stale_leases = sum(1 for lease_info in list_leases(store.root) if not lease_info.alive)
    if repair:
        _repair(store, report)
    report.seconds = time.monotonic() - started
    return report


def _check_shards(store: Store, report: FsckReport) -> None:
    for top in ("objects", "ac"):
        present = set(os.listdir(store.root / top))
        report.missing_shards += [f"{top}/{shard}" for shard in SHARDS if shard not in present]


def _check_objects(store: Store, report: FsckReport, progress: Callable[[int], None] | None) -> None:
    objects_dir = store.objects_dir
    for shard in sorted(os.listdir(objects_dir)):
        shard_dir = objects_dir / shard
        if len(shard) != 2 or not shard_dir.is_dir():
            report.stray_files.append(str(shard_dir))
            continue
        with os.scandir(shard_dir) as entries:
            names = [entry.name for entry in entries]
        for name in names:
            if not is_hex64(shard + name):
                report.stray_files.append(str(shard_dir / name))
                continue
            oid = PREFIX + shard + name
            reason = verify_object(store, oid)
            if reason is not None:
                report.corrupt[oid] = reason
            report.objects += 1
            if progress is not None and report.objects % 1000 == 0:
                progress(report.objects)


def verify_object(store: Store, oid: str) -> str | None:
    """None if the object decodes to bytes hashing to its id, else the reason it does not."""
    path = store.object_path(oid)
    try:
        if path.stat().st_size <= _SMALL:
            codec.decode_verified(oid, oid_hex(oid), str(path), path.read_bytes())
        else:
            with store.open_object(oid) as reader:
                while reader.read(codec.CHUNK):
                    pass
    except (FileNotFoundError, MissingObjectError):
        return None  # removed while we looked (gc): not corruption
    except CorruptObjectError as exc:
        return str(exc)
    except OSError as exc:
        return f"object {oid} is unreadable ({exc.strerror}): {path}"
    return None


def _check_actions(store: Store, report: FsckReport) -> None:
    trees_ok: dict[str, str | None] = {}
    for key, record_id in store.iter_actions():
        report.actions += 1
        why = _action_problem(store, report, record_id, trees_ok)
        if why is not None:
            report.bad_actions[key] = why


def _action_problem(store: Store, report: FsckReport, record_id: str | None,
                    trees_ok: dict[str, str | None]) -> str | None:
    if record_id is None:
        return "entry file is damaged"
    problem = _object_problem(store, report, record_id)
    if problem is not None:
        return f"record {record_id} {problem}"
    try:
        record = json.loads(store.get_bytes(record_id))
    except (ValueError, StoreError):
        return f"record {record_id} is not JSON"
    if not isinstance(record, dict) or "outputs" not in record:
        return f"record {record_id} has no outputs"
    try:
        outputs = output_ids(record["outputs"], f"record {record_id}")
    except ValueError as exc:
        return str(exc)
    for oid in outputs:
        problem = _object_problem(store, report, oid)
        if problem is not None:
            return f"output {oid} {problem}"
        if oid not in trees_ok:
            trees_ok[oid] = _tree_problem(store, report, oid)
        if trees_ok[oid] is not None:
            return f"output tree {oid}: {trees_ok[oid]}"
    return None


def _object_problem(store: Store, report: FsckReport, oid: str) -> str | None:
    if oid in report.corrupt:
        return "is corrupt"
    if not store.has(oid):
        return "is missing"
    return None


def _tree_problem(store: Store, report: FsckReport, oid: str) -> str | None:
    """If `oid` is a tree, the first of its files that is missing or corrupt."""
    try:
        entries = read_tree(store, oid)
    except (NotATreeError, StoreError):
        return None
    for entry in entries:
        if entry.object is not None:
            problem = _object_problem(store, report, entry.object)
            if problem is not None:
                return f"file {entry.path} ({entry.object}) {problem}"
    return None


def _check_refs(store: Store, report: FsckReport) -> None:
    records_ok: dict[str, str | None] = {}
    trees_ok: dict[str, str | None] = {}
    for name, target in iter_ref_entries(store):
        report.refs += 1
        if target is None:
            report.bad_refs[name] = "ref file is damaged"
            continue
        report.ref_targets[name] = target
        problem = _object_problem(store, report, target)
        if problem is not None:
            report.bad_refs[name] = f"target {target} {problem}"
            continue
        bad = _head_problems(store, report, target, records_ok, trees_ok)
        if bad:
            report.bad_head_nodes[name] = bad


def _head_problems(store: Store, report: FsckReport, head_id: str, records_ok: dict[str, str | None],
                   trees_ok: dict[str, str | None]) -> dict[int, str]:
    """{node index: why} for the nodes of a campaign head whose record or outputs are gone."""
    head = _read_json(store, head_id)
    nodes = head.get("nodes") if isinstance(head, dict) else None
    if not isinstance(nodes, list):
        return {}  # not a campaign head: the ref's target alone is what it names
    bad = {}
    for index, node in enumerate(nodes):
        record_id = node.get("record") if isinstance(node, dict) else None
        if not isinstance(record_id, str):
            continue
        if record_id not in records_ok:
            records_ok[record_id] = _action_problem(store, report, record_id, trees_ok)
        if records_ok[record_id] is not None:
            where = node.get("address") or {}
            label = "/".join(str(v) for v in where.values()) if isinstance(where, dict) else "?"
            bad[index] = f"node {node.get('kind')} {label}: {records_ok[record_id]}"
    return bad


def _read_json(store: Store, oid: str) -> object:
    try:
        return json.loads(store.get_bytes(oid))
    except (ValueError, StoreError):
        return None


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
        check_build_log(doc, path.name)
    except StoreError as exc:
        return str(exc).removeprefix(f"{path.name}: ")
    return None


def _repair(store: Store, report: FsckReport) -> None:
    quarantine = store.root / "quarantine"
    quarantine.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for shard in report.missing_shards:
        (store.root / shard).mkdir(exist_ok=True)
        report.repaired.append(f"recreated shard folder {shard}")
    for oid in report.corrupt:
        path = store.object_path(oid)
        with contextlib.suppress(FileNotFoundError):
            os.rename(path, quarantine / f"{oid_hex(oid)}.{stamp}")
            fsync_path(path.parent)
            report.repaired.append(f"quarantined corrupt object {oid}")
    for key in report.bad_actions:
        path = entry_path(store, key)
        with contextlib.suppress(FileNotFoundError):
            os.rename(path, quarantine / f"ac-{oid_hex(key)}.{stamp}")
            fsync_path(path.parent)
            report.repaired.append(f"quarantined action-cache entry {key} (it will be rebuilt)")
    for name in report.bad_build_logs:
        with contextlib.suppress(FileNotFoundError):
            os.rename(builds_dir(store.root) / name, quarantine / f"build-{name}.{stamp}")
            report.repaired.append(f"quarantined build log builds/{name} (queries index the others)")
    if report.corrupt or report.bad_actions or report.bad_build_logs:
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
            path = store.root / "refs" / name
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, store.root / "quarantine" / f"ref-{name.replace('/', '__')}")
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
        head = _read_json(store, head_id)
        if not isinstance(head, dict) or not isinstance(head.get("nodes"), list):
            continue
        nodes = [node if index not in bad else _quarantined_node(node, bad[index])
                 for index, node in enumerate(head["nodes"])]
        with contextlib.suppress(RefConflict):
            store.set_ref(name, store.put_json({**head, "nodes": nodes}), expected=head_id)
            report.repaired.append(f"ref {name}: {len(bad)} node(s) whose record or outputs are gone no longer "
                                   "name them (the next build rebuilds them)")


def _quarantined_node(node: dict[str, object], why: str) -> dict[str, object]:
    """A head node that keeps its address and key (so `claw explain` can say what happened) but names
    no record: nothing reuses it, gc and export do not follow it."""
    return {**node, "record": None, "record_doc": None, "quarantined": why}
