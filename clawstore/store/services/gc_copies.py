"""The packs a gc's rewrite copies into, listed before each is begun, so that the next gc knows a killed one's copies.

A gc SIGKILLed before it published the index naming its copies leaves them sealed (or one unsealed) and named by no
index segment: garbage, but young, so the grace period alone would keep them up to an hour (a whole copy of what the
rewrite kept). Nobody but that gc wrote them, and gcs never overlap (`locks/gc.lock`), so the next gc drops those
the index names nothing in whatever their age (docs/gc-and-archives.md, Crashes). The list is `locks/gc.copies`
(gc's own state, beside the lock that guards it): a pack id a line, each appended and fsynced before its pack exists.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from clawstore.host.durable import fsync_path, write_file_atomic
from clawstore.store.core.locks import held_now
from clawstore.store.core.packfile import pack_path

COPIES_FILE = "gc.copies"
_PACK_ID = re.compile(r"[0-9a-f]{32}")
_READ_AT_MOST = 1 << 20  # ~30,000 ids: more than any rewrite makes (a damaged file is not read whole)


def listed_copies(locks_dir: Path, packs_dir: Path) -> frozenset[str]:
    """The listed packs that still exist (a line that is not a pack id, say a torn last one, names nothing)."""
    try:
        with open(locks_dir / COPIES_FILE, "rb") as fh:
            text = fh.read(_READ_AT_MOST).decode("ascii", "replace")
    except FileNotFoundError:
        return frozenset()
    return frozenset(line for line in text.splitlines()
                     if _PACK_ID.fullmatch(line) and pack_path(packs_dir, line).exists())


def copies_a_dry_run_counts(root: Path, locks_dir: Path, packs_dir: Path, gc_lock: str) -> frozenset[str]:
    """The listed copies as a dry run (which takes no lock) counts them: none while a gc holds `gc_lock` (its list is
    then that gc's, copies under way), else those a killed gc left. Read before the lock is looked at: a gc that
    begins after the look lists only copies this list does not hold."""
    copies = listed_copies(locks_dir, packs_dir)
    return frozenset() if copies and held_now(root, gc_lock) else copies


def note_copy(locks_dir: Path, pack_id: str) -> None:
    """List `pack_id` durably (before its pack is created: a kill can leave no copy unlisted)."""
    path = locks_dir / COPIES_FILE
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, f"{pack_id}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_path(locks_dir)


def keep_listed(locks_dir: Path, tmp_dir: Path, still: list[str]) -> None:
    """After a rewrite that ended: list only `still` (earlier copies a running build kept from deletion)."""
    if still:
        write_file_atomic(locks_dir / COPIES_FILE, "".join(f"{pack}\n" for pack in still).encode(), tmp_dir)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(locks_dir / COPIES_FILE)
