"""What killed writers leave behind: temp files and scratch directories in `tmp/`, and lease files of dead
processes.

Temp files and the scratch directories of pushes and pulls (clawstore/scratch.py) carry their writer's
pid and start time in their name (clawstore/durable.py), leases
are flocked while their holder lives (clawstore/store/locks.py), so both can be told apart from a live
writer's without any clock. fsck --repair, gc and the start of every build remove them. The packs a
pull keeps for a pull run again (remotes/NAME/incoming/, clawstore/remote/downloads.py) are no dead
writer's: gc alone removes them, once older than its grace period (`stale_downloads`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.durable import process_alive, temp_owner
from clawstore.scratch import remove_tree
from clawstore.store.locks import remove_stale_leases

if TYPE_CHECKING:
    from clawstore.store.store import Store

INCOMING = "incoming"  # in a remote's cache directory (remotes/NAME/): the packs pulls keep


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
        yield Path(entry.path), size


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
    for folder in sorted(store.root.glob(f"remotes/*/{INCOMING}")):
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
    """(all temp files, stale ones)."""
    try:
        total = sum(1 for _ in os.scandir(store.tmp_dir))
    except FileNotFoundError:
        return 0, 0
    return total, sum(1 for _ in stale_temp_files(store))


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


def remove_leftovers(store: Store) -> tuple[int, int]:
    """Delete dead writers' temp files and stale leases; returns (temp files, leases) removed."""
    files, _ = remove_stale_temp_files(store)
    return files, remove_stale_leases(store.root)
