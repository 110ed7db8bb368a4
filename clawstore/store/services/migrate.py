"""Upgrade a format-1 store (one file per object and per action-cache entry) to format 2 in place, crash-safe without a
journal. How: docs/store.md (Migration from format 1)."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from clawstore.errors import CorruptObjectError, StoreError
from clawstore.host.durable import fsync_path
from clawstore.store.actions import set_entries
from clawstore.store.core import codec
from clawstore.store.core.ids import PREFIX, is_hex64, is_oid
from clawstore.store.core.layout import (
    ACTIONS1,
    FORMAT1_DIRS,
    FORMAT_VERSION,
    OBJECTS1,
    QUARANTINE,
    create_layout,
    ensure_dirs,
    read_format,
    remove_format1_leftovers,
    write_marker,
)
from clawstore.store.core.locks import exclusive
from clawstore.store.core.objects import ObjectStore

_BATCH_OBJECTS = 2000  # objects per commit: bounded pending state, few fsyncs
_WHOLE_MAX = 8 << 20


@dataclass
class MigrationReport:
    migrated: bool = False  # False: the store was already format 2
    objects: int = 0
    copied: int = 0  # objects not in the index yet (the rest a killed attempt had copied)
    actions: int = 0
    corrupt: list[str] = field(default_factory=list)
    seconds: float = 0.0


def open_layout(root: Path, create: bool = True) -> None:
    """Check (or create) the layout under `root`; raises StoreError if it is not a store.

    A format-1 store is upgraded in place first (crash-safe: migrate).
    """
    version = read_format(root)
    if version is None:
        if not create:
            raise StoreError(f"no store at {root} (use --store DIR or set CLAW_STORE)")
        create_layout(root)
        return
    if version == 1:
        migrate(root)
    elif any((root / name).exists() for name in FORMAT1_DIRS):
        remove_format1_leftovers(root)  # a migration was killed after its marker switched


def migrate(root: Path) -> MigrationReport:
    """Convert the store at `root` to format 2 (a no-op if it already is)."""
    started = time.monotonic()
    report = MigrationReport()
    if read_format(root) is None:
        raise StoreError(f"no store at {root} (use --store DIR or set CLAW_STORE)")
    if read_format(root) != 1:
        return report
    ensure_dirs(root)
    with exclusive(root, "migrate"):
        if read_format(root) != 1:
            return report
        store = ObjectStore(root)  # (not a Store: that opens the layout, which is being converted)
        loose = list(_loose_objects(root / OBJECTS1))
        for first in range(0, len(loose), _BATCH_OBJECTS):
            with store.batch():  # one durability barrier per few thousand objects
                for hexdigest, path in loose[first:first + _BATCH_OBJECTS]:
                    report.objects += 1
                    _copy_object(store, root, hexdigest, path, report)
        entries: dict[bytes, tuple[bytes | None, int]] = {}
        for key_hex, record_id, mtime_ns in _loose_actions(root / ACTIONS1):
            if record_id is not None and store.has(record_id):  # a dangling entry would only mislead
                entries[bytes.fromhex(key_hex)] = (bytes.fromhex(record_id[len(PREFIX):]), mtime_ns)
        set_entries(store, entries)
        report.actions = len(entries)
        write_marker(root, FORMAT_VERSION)  # from here on the store is format 2
        remove_format1_leftovers(root)
        fsync_path(root)
    report.migrated = True
    report.seconds = time.monotonic() - started
    return report


def _copy_object(store: ObjectStore, root: Path, hexdigest: str, path: Path, report: MigrationReport) -> None:
    if store.has(PREFIX + hexdigest):
        return  # copied by a migration that was killed
    try:
        _verify(hexdigest, path)
    except CorruptObjectError as exc:
        report.corrupt.append(str(exc))
        with contextlib.suppress(OSError):
            os.rename(path, root / QUARANTINE / f"{hexdigest}.format1")
        return
    store.put_frame_file(bytes.fromhex(hexdigest), path)
    report.copied += 1


def _loose_objects(objects_dir: Path):  # type: ignore[no-untyped-def]
    if not objects_dir.is_dir():
        return
    for shard in sorted(os.listdir(objects_dir)):
        if len(shard) != 2 or not (objects_dir / shard).is_dir():
            continue
        for name in sorted(os.listdir(objects_dir / shard)):
            if is_hex64(shard + name):
                yield shard + name, objects_dir / shard / name


def _loose_actions(ac_dir: Path):  # type: ignore[no-untyped-def]
    if not ac_dir.is_dir():
        return
    for shard in sorted(os.listdir(ac_dir)):
        if not (ac_dir / shard).is_dir():
            continue
        for name in sorted(os.listdir(ac_dir / shard)):
            if not (is_hex64(name) and name.startswith(shard)):
                continue
            path = ac_dir / shard / name
            try:
                text = path.read_text(encoding="ascii").strip()
                mtime_ns = path.stat().st_mtime_ns
            except (OSError, UnicodeDecodeError):
                continue
            yield name, (text if is_oid(text) else None), mtime_ns


def _verify(hexdigest: str, path: Path) -> None:
    oid = PREFIX + hexdigest
    if path.stat().st_size <= _WHOLE_MAX:
        codec.decode_verified(oid, hexdigest, str(path), path.read_bytes())
        return
    with codec.ObjectReader(oid, hexdigest, str(path)) as reader:
        while reader.read(codec.CHUNK):
            pass
