"""A killed writer's finished work: the blobs its pack holds that no index segment names, verified and named, so that
answers already paid for are not lost. When and how: docs/store.md (Adopting a killed writer's work)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from clawstore.errors import ClawError, CorruptObjectError
from clawstore.host.durable import fsync_path
from clawstore.store.actions import entry_problem, output_ids
from clawstore.store.core import codec
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.index import (
    ActionEntry,
    Loc,
    Segment,
    index_lock,
    merge_action,
    new_segment_name,
    write_segment,
)
from clawstore.store.core.locks import lease
from clawstore.store.core.packfile import (
    ACTION_SIZE,
    HEADER,
    KIND_ACTION,
    KIND_OBJECT,
    Blob,
    PackWriter,
    decode_action,
    is_sealed,
    iter_pack_ids,
    pack_path,
    walk_pack,
    writer_alive,
)
from clawstore.values import jsontext

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore

_SMALL = 4 << 20  # blobs up to this size are verified in memory, larger ones streamed


@dataclass
class AdoptReport:
    packs: int = 0  # dead writers' packs looked at
    objects: int = 0  # objects named for the first time
    entries: int = 0  # action-cache entries named for the first time
    refused: list[str] = field(default_factory=list)  # what failed its check, and why


def blob_problem(fh: BinaryIO, pack: str, blob: Blob) -> str | None:
    """None if the blob is intact, else the reason (naming the object and where it is)."""
    fd = fh.fileno()
    oid = PREFIX + blob.id.hex()
    where = f"pack {pack} at {blob.offset}"
    if blob.kind == KIND_ACTION:
        return None if blob.length == ACTION_SIZE else f"action entry {oid} is damaged: {where}"
    try:
        if blob.length <= _SMALL:
            codec.decode_verified(oid, blob.id.hex(), where, os.pread(fd, blob.length, blob.offset))
        else:
            from clawstore.store.core.objects import check_blob

            check_blob(fd, oid, blob.offset, blob.length, where)
    except CorruptObjectError as exc:
        return str(exc)
    except OSError as exc:
        return f"object {oid} is unreadable ({exc.strerror}): {where}"
    return None


def dead_writers(packs_dir: Path) -> list[str]:
    """Packs with no trailer and no live writer: each a killed writer's (a footer read and a flock test
    per pack, so a build pays next to nothing when there are none)."""
    if not packs_dir.is_dir():
        return []
    found = []
    for pack in iter_pack_ids(packs_dir):
        path = pack_path(packs_dir, pack)
        with contextlib.suppress(FileNotFoundError):
            if not is_sealed(path) and not writer_alive(path):
                found.append(pack)
    return found


def adopt_orphans(store: ObjectStore) -> AdoptReport:
    """Name what killed writers finished but never indexed (see the module docstring)."""
    runtime = store.runtime
    report = AdoptReport()
    if not dead_writers(runtime.packs_dir):
        return report
    # Under a lease of its own, whoever adopts (a `claw status` holds none): a build alone on the store looks for
    # entries other processes committed only when leases/ changed (store/claims.py Neighbours), and an entry adopted
    # unseen would have it execute, and pay for, a node that a killed build had finished. The index lock: one adopter
    # at a time, and never beside a gc's rewrite.
    with lease(store.root, "adopt orphans"), index_lock(store.layout.locks):
        runtime.index.refresh()
        view = runtime.index
        objects: dict[bytes, Loc] = {}
        entries: dict[bytes, ActionEntry] = {}
        packs = dead_writers(runtime.packs_dir)  # again, under the lock: another may have sealed them
        walked: list[tuple[Path, list[Blob]]] = []
        for pack in packs:
            report.packs += 1
            path = pack_path(runtime.packs_dir, pack)
            blobs = walk_pack(path).blobs
            walked.append((path, blobs))
            with open(path, "rb") as fh:
                for blob in blobs:
                    if blob.kind == KIND_OBJECT:
                        if blob.id in objects or view.find_object(blob.id, look_again=False) is not None:
                            continue
                        problem = blob_problem(fh, pack, blob)
                        if problem is None:
                            objects[blob.id] = (pack, blob.offset, blob.length)
                        else:
                            report.refused.append(problem)
                    elif blob.length == ACTION_SIZE:
                        record, time_ns = decode_action(os.pread(fh.fileno(), blob.length, blob.offset))
                        known = view.find_action(blob.id, look_again=False)
                        if known is None or known.time_ns < time_ns:
                            merge_action(entries, blob.id, ActionEntry(record, time_ns, pack, blob.offset))
            fsync_path(path)  # (fsync) before anything of it is named
        if objects:  # objects first, then the entries that name them (the store's write order)
            _publish(store, Segment(new_segment_name(), objects=objects))
            report.objects = len(objects)
        checked = {key: entry for key, entry in entries.items() if _entry_ok(store, key, entry, report)}
        if checked:
            _publish(store, Segment(new_segment_name(), actions=checked))
            report.entries = sum(1 for entry in checked.values() if entry.record is not None)
        # Sealed only once what it holds is named: an adopter coming meanwhile finds it unsealed, waits for the lock
        # and then reads the index with it. Sealed first (before session 72), it was passed over as adopted while its
        # entries were not yet named: the build beside, taking over the dead build's claims in two threads at once,
        # asked again for an answer the killed build had written (tests/faults/test_killed_beside.py).
        for path, blobs in walked:
            _seal(path, blobs)
    return report


def _publish(store: ObjectStore, segment: Segment) -> None:
    write_segment(store.runtime.index_dir, store.runtime.tmp_dir, segment)
    store.runtime.index.add_own(segment)


def _entry_ok(store: ObjectStore, key: bytes, entry: ActionEntry, report: AdoptReport) -> bool:
    """Does the entry verify as an imported one must (its record for its key, every output present)?"""
    if entry.record is None:
        return True  # a removal (gc, repair) names nothing
    oid, record_id = PREFIX + key.hex(), PREFIX + entry.record.hex()
    try:
        record = jsontext.loads(store.get_bytes(record_id))
        problem = entry_problem(oid, record, store.has)
        if problem is None:
            missing = store.missing(output_ids(record.get("outputs"), f"record {record_id}"))
            problem = f"its record names {len(missing)} output(s) not in the store" if missing else None
    except (ClawError, ValueError) as exc:
        problem = f"its record {record_id} cannot be read ({exc})"
    if problem is not None:
        report.refused.append(f"action entry {oid}: {problem}")
    return problem is None


def _seal(path: Path, blobs: list[Blob]) -> None:
    """Give a dead writer's pack the trailer it never wrote (its torn end cut), keeping its mtime; if
    that is not possible (another process holds it, a read-only file), make its bytes durable only."""
    before = os.stat(path)
    if before.st_size < len(HEADER):
        return  # killed before its header: no blobs (gc removes it)
    mode = stat.S_IMODE(before.st_mode)
    try:
        if not mode & stat.S_IWUSR:
            os.chmod(path, mode | stat.S_IWUSR)
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return
    writer = None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        end = blobs[-1].offset + blobs[-1].length if blobs else None
        if os.fstat(fd).st_size != before.st_size or is_sealed(path):
            os.fsync(fd)
            return
        writer = PackWriter.reopen(path, fd, blobs, end)
        writer.seal()
        os.utime(fd, ns=(before.st_atime_ns, before.st_mtime_ns))
        fsync_path(path.parent)
    except BlockingIOError:
        os.fsync(fd)
    finally:
        if writer is None:
            os.close(fd)
        else:
            writer.close()
        with contextlib.suppress(OSError):
            os.chmod(path, mode)
