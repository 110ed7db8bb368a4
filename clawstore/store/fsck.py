"""fsck: verify every object's hash, every action-cache entry and every ref; optionally repair.

Problems (make `claw fsck` exit 1): a corrupt object, an action-cache entry that is damaged or whose
record (or one of the record's outputs, or a file of an output tree) is missing or corrupt, a ref
whose target is missing or corrupt. Not problems: temp files (a live writer's, or leftovers of killed
writers), stale leases, stray files.

Repair quarantines corrupt objects and bad action-cache entries under `quarantine/` (the next build
recomputes those nodes), removes stale temp files and stale leases. Refs are reported, never changed.
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
from clawstore.store.durable import fsync_path, process_alive, temp_owner
from clawstore.store.ids import PREFIX, is_hex64, oid_hex
from clawstore.store.locks import list_leases, remove_stale_leases
from clawstore.store.refs import iter_ref_entries
from clawstore.store.trees import NotATreeError, read_tree

if TYPE_CHECKING:
    from clawstore.store.store import Store

_SMALL = 4 << 20  # objects up to this stored size are verified in memory, larger ones streamed


@dataclass
class FsckReport:
    objects: int = 0
    corrupt: dict[str, str] = field(default_factory=dict)  # oid -> message naming it
    actions: int = 0
    bad_actions: dict[str, str] = field(default_factory=dict)  # key -> reason
    refs: int = 0
    bad_refs: dict[str, str] = field(default_factory=dict)  # name -> reason
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
        )

    @property
    def unresolved(self) -> list[str]:
        """Problems still present: all of them, or after a repair only the refs (never auto-changed)."""
        if not self.did_repair:
            return self.problems
        return [f"ref {name}: {why}" for name, why in self.bad_refs.items()]

    @property
    def clean(self) -> bool:
        return not self.unresolved


def fsck(store: Store, repair: bool = False, progress: Callable[[int], None] | None = None) -> FsckReport:
    started = time.monotonic()
    report = FsckReport()
    _check_objects(store, report, progress)
    _check_actions(store, report)
    _check_refs(store, report)
    _count_temp_files(store, report)
    report.stale_leases = sum(1 for lease_info in list_leases(store.root) if not lease_info.alive)
    if repair:
        _repair(store, report)
    report.seconds = time.monotonic() - started
    return report


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
    for name, target in iter_ref_entries(store):
        report.refs += 1
        if target is None:
            report.bad_refs[name] = "ref file is damaged"
            continue
        problem = _object_problem(store, report, target)
        if problem is not None:
            report.bad_refs[name] = f"target {target} {problem}"


def _stale_temp_files(store: Store) -> tuple[int, list[Path]]:
    total, stale = 0, []
    with os.scandir(store.tmp_dir) as entries:
        for entry in entries:
            total += 1
            owner = temp_owner(entry.name)
            if owner is None or not process_alive(*owner):
                stale.append(Path(entry.path))
    return total, stale


def _count_temp_files(store: Store, report: FsckReport) -> None:
    total, stale = _stale_temp_files(store)
    report.temp_files, report.stale_temp_files = total, len(stale)


def _repair(store: Store, report: FsckReport) -> None:
    quarantine = store.root / "quarantine"
    stamp = time.strftime("%Y%m%dT%H%M%S")
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
    if report.corrupt or report.bad_actions:
        fsync_path(quarantine)
    _, stale = _stale_temp_files(store)
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    if stale:
        report.repaired.append(f"removed {len(stale)} stale temp file(s)")
    removed = remove_stale_leases(store.root)
    if removed:
        report.repaired.append(f"removed {removed} stale lease(s)")
    report.did_repair = True
