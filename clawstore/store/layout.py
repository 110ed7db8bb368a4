"""The store's directory layout, created once and marked by a format file."""

from __future__ import annotations

import json
from pathlib import Path

from clawstore.errors import StoreError
from clawstore.store.durable import fsync_path, sync_filesystem, write_file_atomic

FORMAT_FILE = "CLAWSTORE"
FORMAT_VERSION = 1
SHARDS = [f"{i:02x}" for i in range(256)]
# Subdirectories; objects/ and ac/ are pre-sharded so no put ever has to create a directory.
DIRS = ("objects", "ac", "tmp", "refs", "leases", "locks", "quarantine", "builds", "manifest")


def open_layout(root: Path, create: bool = True) -> None:
    """Check (or create) the layout under `root`; raises StoreError if it is not a store."""
    marker = root / FORMAT_FILE
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not create:
            raise StoreError(f"no store at {root} (use --store DIR or set CLAW_STORE)") from None
        _create(root)
        return
    except OSError as exc:
        raise StoreError(f"cannot read {marker}: {exc.strerror}") from None
    try:
        version = json.loads(text)["format"]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"{marker}: not a clawstore format file") from None
    if version != FORMAT_VERSION:
        raise StoreError(f"{marker}: unsupported store format {version!r} (this claw reads {FORMAT_VERSION})")


def _create(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise StoreError(f"store path {root} exists and is not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
        for name in DIRS:
            (root / name).mkdir(exist_ok=True)
        for top in ("objects", "ac"):
            for shard in SHARDS:
                (root / top / shard).mkdir(exist_ok=True)
        sync_filesystem(root)  # one flush for the few hundred directories instead of one per directory
        # The marker comes last: a store whose marker exists has its whole layout.
        body = json.dumps({"format": FORMAT_VERSION}).encode() + b"\n"
        write_file_atomic(root / FORMAT_FILE, body, root / "tmp")
        fsync_path(root)
    except OSError as exc:
        raise StoreError(f"cannot create store at {root}: {exc.strerror}") from None
