"""Space the store keeps allocated for the worst moment, given up when a write fails for space, so that answers in
flight when the disk fills are still stored instead of paid for and lost. Details: docs/store.md (Details by module)."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from clawstore.host.durable import temp_name
from clawstore.store.core.layout import TMP

RESERVE_FILE = "reserve"
RESERVE_BYTES = 1 << 20  # room for the answers of a build's running nodes, their window and its log
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def keep_reserve(root: Path, size: int = RESERVE_BYTES) -> bool:
    """Make sure the reserve is allocated (a temp file renamed into place: never a short one); False if
    there is no room for it."""
    path = root / RESERVE_FILE
    if path.exists():
        return True
    tmp = root / TMP / temp_name()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


def release_reserve(root: Path) -> bool:
    """Give the reserve's space back to the filesystem; whether there was one."""
    try:
        os.unlink(root / RESERVE_FILE)
        return True
    except FileNotFoundError:
        return False


def is_space_error(error: BaseException) -> bool:
    """Did a write fail because the disk (or the user's quota) is full?"""
    if isinstance(error, OSError) and error.errno in SPACE_ERRNOS:
        return True
    text = str(error)
    return any(os.strerror(code) in text for code in SPACE_ERRNOS)
