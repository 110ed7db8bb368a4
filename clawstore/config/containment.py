"""The path rule: every file a config names resolves inside its workspace, symlinks followed.

Suites are written by others; a case that names `../../etc/shadow`, an absolute path, or a symlink
(or symlinked folder) pointing out of the workspace would otherwise have that host file read,
stored, sent to the provider and shipped in archives. A symlink that stays inside is fine.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def real_root(root: Path) -> Path:
    return Path(os.path.realpath(root))


def escapes(path: Path, root_real: Path) -> Path | None:
    """Where `path` really leads when that is outside `root_real` (a realpath), else None."""
    real = Path(os.path.realpath(path))
    return None if real == root_real or real.is_relative_to(root_real) else real


def outside_message(written: str, real: Path) -> str:
    return (f"{written} resolves to {real}, outside the workspace (a path a config names must stay "
            "inside the workspace, after following symlinks)")


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, for an error line."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


def not_a_file(path: Path, written: str, hint: str) -> str | None:
    """Why `path` (named `written` in its config) is no file to read, or None: missing ("file not found", with
    `hint` on where paths start), or there but a directory, pipe or device, said as such (not "not found")."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return f"file not found: {written} ({hint})"
    return None if stat.S_ISREG(mode) else f"{written} is not a regular file ({file_kind(mode)})"
