"""What killed writers leave behind (temp files, scratch directories, lease files of dead processes, the journal of a
build killed before its first log), told apart from a live writer's and removed. How they are recognised:
docs/store.md (Temp files and leases of dead processes; Details by module)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.host.durable import OUTSIDE_SUFFIX, fsync_path, process_alive, temp_owner
from clawstore.host.scratch import remove_tree
from clawstore.store.core.layout import INCOMING, StoreLayout
from clawstore.store.core.locks import list_leases, remove_stale_leases

if TYPE_CHECKING:
    from clawstore.store.store import Store



def stale_temp_files(store: Store) -> Iterator[tuple[Path, int]]:
    """(path, size) of each temp file whose writer is gone (or whose name is not a writer's), and of each
    scratch directory a writer that is gone named (its files' sizes summed)."""
    try:
        entries = list(os.scandir(store.tmp_dir))
    except FileNotFoundError:
        return
    for entry in entries:
        owner = temp_owner(entry.name)
        if owner is not None and process_alive(*owner):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                if owner is None:
                    continue  # not ours to remove
                size = _tree_size(entry.path)
            else:
                size = entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:
            continue
        if owner is not None and entry.name.endswith(OUTSIDE_SUFFIX):
            yield from _outside_temp_file(Path(entry.path), owner)  # before its pointer, which finds it
        yield Path(entry.path), size


def _outside_temp_file(pointer: Path, owner: tuple[int, int]) -> Iterator[tuple[Path, int]]:
    """The temp file a dead writer's pointer names beside its output (an export's: durable.atomic_file),
    if it is still there and is one: a regular file named `.<output>.<pid>-<ticks>-<random>.tmp` of the
    same writer. Anything else a pointer may name (a hand-made link) is left alone."""
    try:
        target = Path(os.readlink(pointer))
        info = target.lstat()
    except OSError:
        return
    parts = target.name.rsplit(".", 2)
    if (target.is_absolute() and stat.S_ISREG(info.st_mode) and len(parts) == 3 and parts[0].startswith(".")
            and parts[2] == "tmp" and temp_owner(parts[1]) == owner):
        yield target, info.st_size


def _tree_size(path: str) -> int:
    """The bytes removing a scratch directory frees: its files no other link keeps (a pull's downloads
    are also linked where a pull run again takes them, or already adopted into packs/). Flat: pushes
    and pulls make no subfolders, so a folder inside is not descended into."""
    size = 0
    for entry in os.scandir(path):
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if entry.is_file(follow_symlinks=False) and info.st_nlink == 1:
            size += info.st_size
    return size


def stale_downloads(store: Store, cutoff: float) -> Iterator[tuple[Path, int]]:
    """(path, size) of each pack a pull downloaded and kept for a pull run again after a kill
    (remotes/NAME/incoming/, clawstore/remote/downloads.py), unchanged since before `cutoff` (epoch s):
    gc's to remove once its grace period has passed. (A link: its bytes are freed with its last one.)"""
    for folder in sorted(store.layout.remotes.glob(f"*/{INCOMING}")):
        with contextlib.suppress(FileNotFoundError):
            for entry in list(os.scandir(folder)):
                with contextlib.suppress(FileNotFoundError):
                    info = entry.stat(follow_symlinks=False)
                    if info.st_mtime < cutoff:
                        yield Path(entry.path), info.st_size


def remove_stale_downloads(store: Store, cutoff: float) -> tuple[int, int]:
    """Delete the kept packs `stale_downloads` names; returns (files, bytes) removed."""
    return _remove(stale_downloads(store, cutoff))


def count_temp_files(store: Store) -> tuple[int, int]:
    """(all temp files, stale ones); a dead writer's temp file outside the store counts with its pointer."""
    try:
        total = sum(1 for _ in os.scandir(store.tmp_dir))
    except FileNotFoundError:
        return 0, 0
    stale = [path for path, _ in stale_temp_files(store)]
    return total + sum(1 for path in stale if path.parent != store.tmp_dir), len(stale)


def remove_stale_temp_files(store: Store) -> tuple[int, int]:
    """Delete dead writers' temp files and scratch directories; returns (files, bytes) removed."""
    return _remove(stale_temp_files(store))


def _remove(found: Iterator[tuple[Path, int]]) -> tuple[int, int]:
    """Delete each (path, size) found (a directory with what it holds); (count, bytes) removed."""
    files = size_sum = 0
    for path, size in list(found):
        try:
            if path.is_dir() and not path.is_symlink():
                remove_tree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue
        files += 1
        size_sum += size
    return files, size_sum


def orphan_journals(root: Path) -> list[Path]:
    """Build log journals (`builds/<id>.jsonl`) without their log, of builds no live process holds: what a build killed
    between its first write's journal and that write's log leaves (builder/buildlog.py `write`; it comes before the
    build's first request, so nothing was paid). Listed before the leases are read: a build takes its lease before it
    makes its journal. A journal that names a node not reused (its log quarantined by `claw fsck --repair`, say) is
    none of them. (The store's build logs: store/buildlogs.py.)"""
    directory = StoreLayout(root).builds
    found = sorted(directory.glob("*.jsonl")) if directory.is_dir() else []
    if not found:
        return []
    live = {lease.purpose.split(" ", 1)[1] for lease in list_leases(root)
            if lease.alive and lease.purpose.startswith("build ")}  # (store/buildlogs.py live_builds)
    return [journal for journal in found
            if journal.stem not in live and not journal.with_suffix(".json").exists() and _reused_alone(journal)]


def _reused_alone(journal: Path) -> bool:
    """Every node of `journal` reused (none paid for by its build); False when it cannot be read. (A torn last line,
    a killed writer's, is none.)"""
    try:
        with open(journal, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break
                entry = json.loads(line)
                if not isinstance(entry, dict) or entry.get("action") != "reuse":
                    return False
    except (OSError, ValueError):
        return False
    return True


def remove_orphan_journals(root: Path) -> int:
    """Delete the journals `orphan_journals` names; how many."""
    removed = 0
    for journal in orphan_journals(root):
        with contextlib.suppress(FileNotFoundError):
            journal.unlink()
            removed += 1
    if removed:
        fsync_path(StoreLayout(root).builds)
    return removed


def remove_leftovers(store: Store) -> tuple[int, int, int]:
    """Delete dead writers' temp files, the journals builds killed before their first log left (nothing paid:
    `orphan_journals`) and stale leases (last: a dead build's lease says it is dead); returns
    (temp files, journals, leases) removed."""
    files, _ = remove_stale_temp_files(store)
    journals = remove_orphan_journals(store.root)
    return files, journals, remove_stale_leases(store.root)
