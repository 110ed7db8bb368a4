"""Reaching under the store's interface in tests: where a blob lies, damage, ageing, other views."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.index import (
    ActionEntry,
    IndexView,
    Segment,
    index_lock,
    list_segments,
    merge_action,
    new_segment_name,
    read_segment,
    remove_segments,
    write_segment,
)
from clawstore.store.core.packfile import iter_pack_ids, pack_path


def blob_span(store: Store, oid: str) -> tuple[Path, int, int]:
    """(pack file, offset, length) of an object's stored frame."""
    pack, offset, length = store.locate(oid)
    return pack_path(store.root / "packs", pack), offset, length


def frame_bytes(store: Store, oid: str) -> bytes:
    path, offset, length = blob_span(store, oid)
    with open(path, "rb") as fh:
        return os.pread(fh.fileno(), length, offset)


def flip_in_frame(store: Store, oid: str, position: int) -> None:
    """Damage one byte of an object's frame inside its pack (negative: from the frame's end)."""
    path, offset, length = blob_span(store, oid)
    where = offset + (position if position >= 0 else length + position)
    path.chmod(0o644)
    with open(path, "r+b") as fh:
        byte = os.pread(fh.fileno(), 1, where)
        os.pwrite(fh.fileno(), bytes([byte[0] ^ 0xFF]), where)


def visible_elsewhere(store: Store, oid: str) -> bool:
    """Would another process find the object in the index now?"""
    view = IndexView(store.root / "index", store.root / "tmp", store.root / "locks")
    return view.find_object(bytes.fromhex(oid[len("blake3:"):])) is not None


def pack_files(store: Store) -> list[Path]:
    return [pack_path(store.root / "packs", pack) for pack in iter_pack_ids(store.root / "packs")]


def age(paths: list[Path], seconds: float) -> None:
    """Make files look `seconds` old (what gc's grace period looks at)."""
    when = time.time() - seconds
    for path in paths:
        os.utime(path, (when, when))


def age_packs(store: Store, seconds: float) -> None:
    age(pack_files(store), seconds)


def rewrite_index(store: Store, edit: Callable[[Segment], None]) -> None:
    """Replace the whole index by one segment, changed by `edit` (what a disk or a hand would do)."""
    index_dir = store.root / "index"
    with index_lock(store.root / "locks"):
        names = list_segments(index_dir)
        merged = Segment(new_segment_name(), replaces=names)
        for name in names:
            part = read_segment(index_dir, name)
            merged.objects.update(part.objects)
            for key, entry in part.actions.items():
                merge_action(merged.actions, key, entry)
        edit(merged)
        write_segment(index_dir, store.root / "tmp", merged)
        remove_segments(index_dir, names)
    store.runtime.index.reload()


def age_actions(store: Store, keys: list[str], seconds: float) -> None:
    """Make action-cache entries look `seconds` old: rewrite the index with earlier times."""
    digests = {bytes.fromhex(key[len("blake3:"):]) for key in keys}
    shift = int(seconds * 1e9)

    def older(segment: Segment) -> None:
        for key in digests & set(segment.actions):
            entry = segment.actions[key]
            segment.actions[key] = ActionEntry(entry.record, entry.time_ns - shift, entry.pack, entry.offset)

    rewrite_index(store, older)


def lose_object(store: Store, oid: str) -> None:
    """Make an object gone, as a bad disk or a hand-deleted file would: the index no longer names it."""
    rewrite_index(store, lambda segment: segment.objects.pop(bytes.fromhex(oid[len("blake3:"):]), None))


def places_holding(root: Path, needle: str) -> list[str]:
    """Where in the store at `root` `needle` lies: each object decoded (the packs are compressed) and every other
    file as it is (containers/, builds' logs, refs, the index), by object id or relative path."""
    data = needle.encode("utf-8")
    store = Store(root)
    found = [oid for oid in store.iter_objects() if data in store.get_bytes(oid)]
    packs = root / "packs"
    return found + [str(path.relative_to(root)) for path in sorted(root.rglob("*"))
                    if path.is_file() and not path.is_relative_to(packs) and data in path.read_bytes()]
