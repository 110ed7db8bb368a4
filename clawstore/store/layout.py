"""The store's directory layout, created once and marked by a format file; upgrades format 1."""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import time
from pathlib import Path

from clawstore.durable import fsync_path, write_file_atomic
from clawstore.errors import StoreError

FORMAT_FILE = "CLAWSTORE"
FORMAT_VERSION = 2
DIRS = ("packs", "index", "tmp", "refs", "leases", "locks", "quarantine", "builds", "manifest")
FORMAT1_DIRS = ("objects", "ac")  # loose objects and action-cache files of format 1
STALE_STAGING_S = 600


def read_format(root: Path) -> int | None:
    """The format number in the marker file, None if there is no store at `root`."""
    marker = root / FORMAT_FILE
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {marker}: {exc.strerror}") from None
    try:
        version = json.loads(text)["format"]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"{marker}: not a clawstore format file") from None
    if version not in (1, FORMAT_VERSION):
        raise StoreError(f"{marker}: unsupported store format {version!r} (this claw reads 1 and {FORMAT_VERSION})")
    return int(version)


def ensure_dirs(root: Path) -> None:
    for name in DIRS:
        (root / name).mkdir(exist_ok=True)


def write_marker(root: Path, version: int) -> None:
    body = json.dumps({"format": version}).encode() + b"\n"
    write_file_atomic(root / FORMAT_FILE, body, root / "tmp")
    fsync_path(root)


def remove_format1_leftovers(root: Path) -> None:
    for name in FORMAT1_DIRS:
        shutil.rmtree(root / name, ignore_errors=True)
    fsync_path(root)


def create_layout(root: Path) -> None:
    """Make the layout in a hidden sibling and rename it into place: a store appears whole or not at all
    (a creator killed half-way used to leave a directory without its marker, which no claw would open)."""
    if root.exists() and not root.is_dir():
        raise StoreError(f"store path {root} exists and is not a directory")
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        if root.is_dir() and any(root.iterdir()):
            _create_in_place(root)  # a non-empty directory (not ours to replace): marker last
            return
        _remove_stale_staging(root)
        staging = root.parent / f".{root.name}.new-{secrets.token_hex(8)}"
        staging.mkdir()
        try:
            _create_in_place(staging)
            try:
                os.rename(staging, root)  # replaces an empty directory; fails on a non-empty one
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or read_format(root) is None:
                    raise
                return  # a concurrent creator won the race with a whole store
            fsync_path(root.parent)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:
        raise StoreError(f"cannot create store at {root}: {exc.strerror}") from None


def _create_in_place(root: Path) -> None:
    root.mkdir(exist_ok=True)
    ensure_dirs(root)
    fsync_path(root)  # the new directories' entries
    # The marker comes last: a store whose marker exists has its whole layout.
    write_marker(root, FORMAT_VERSION)


def _remove_stale_staging(root: Path) -> None:
    """Staging directories of creators killed long ago (creation takes milliseconds)."""
    cutoff = time.time() - STALE_STAGING_S
    for leftover in root.parent.glob(f".{root.name}.new-*"):
        try:
            if leftover.lstat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass
