"""Group commit: many puts share one flush, and nothing becomes visible before it is durable.

A batch collects finished-but-unsynced temp files (objects) and small pointer files (action-cache
entries). Committing makes the temp data durable with one flush, renames the objects into place, makes
those renames durable together with the pointers' data, then renames the pointers: the store's write
order (objects → record → pointer) holds across the whole batch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from clawstore.store.durable import fsync_path, rename_into, sync_filesystem, temp_name

# Up to this many files and directories, fsync them one by one; beyond it one syncfs is cheaper.
_FSYNC_EACH_MAX = 4
# Commit automatically past these, so a long burst keeps few open files and bounded unsynced data.
MAX_PENDING_OBJECTS = 256
MAX_PENDING_BYTES = 256 << 20


@dataclass
class PendingObject:
    fd: int
    tmp: Path
    final: Path
    stored_bytes: int


@dataclass
class Batch:
    """Per-thread state of an open `Store.batch()`."""

    tmp_dir: Path
    depth: int = 0
    objects: dict[str, PendingObject] = field(default_factory=dict)
    pointers: dict[Path, bytes] = field(default_factory=dict)
    pending_bytes: int = 0

    def add_object(self, oid: str, pending: PendingObject) -> None:
        old = self.objects.get(oid)
        if old is not None:  # the same content twice in one batch: keep the first copy
            _discard(old)
            return
        self.objects[oid] = pending
        self.pending_bytes += pending.stored_bytes

    def needs_flush(self) -> bool:
        return len(self.objects) >= MAX_PENDING_OBJECTS or self.pending_bytes >= MAX_PENDING_BYTES

    def commit(self, with_pointers: bool) -> None:
        """Publish pending objects (and, at the end of the batch, the pointers) durably."""
        objects = list(self.objects.values())
        self.objects.clear()
        self.pending_bytes = 0
        pointers = list(self.pointers.items()) if with_pointers else []
        if with_pointers:
            self.pointers.clear()
        if not objects and not pointers:
            return
        try:
            _make_durable([p.fd for p in objects], [], self.tmp_dir)
        finally:
            for pending in objects:
                os.close(pending.fd)
        dirs = set()
        for pending in objects:
            rename_into(pending.tmp, pending.final)
            dirs.add(pending.final.parent)
        # Pointer files are written and closed one by one (a batch may queue thousands: holding
        # them all open would run out of file descriptors), then made durable by path.
        staged: list[tuple[Path, Path]] = []
        for final, body in pointers:
            tmp = self.tmp_dir / temp_name()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, body)
            finally:
                os.close(fd)
            staged.append((tmp, final))
        _make_durable([], [*sorted(dirs), *(tmp for tmp, _ in staged)], self.tmp_dir)
        if staged:
            for tmp, final in staged:
                rename_into(tmp, final)
            _make_durable([], sorted({final.parent for _, final in staged}), self.tmp_dir)

    def abort(self) -> None:
        """Drop everything pending: none of it was ever visible."""
        for pending in self.objects.values():
            _discard(pending)
        self.objects.clear()
        self.pointers.clear()
        self.pending_bytes = 0


def _discard(pending: PendingObject) -> None:
    os.close(pending.fd)
    try:
        os.unlink(pending.tmp)
    except FileNotFoundError:
        pass


def _make_durable(fds: list[int], dirs: list[Path], anchor: Path) -> None:
    """fsync a few files/directories one by one, or the whole filesystem (of `anchor`) at once."""
    if not fds and not dirs:
        return
    if len(fds) + len(dirs) <= _FSYNC_EACH_MAX:
        for fd in fds:
            os.fsync(fd)
        for directory in dirs:
            fsync_path(directory)
        return
    sync_filesystem(anchor)
