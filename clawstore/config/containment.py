"""The path rule: every file a config names resolves inside its workspace, symlinks followed.

Suites are written by others; a case that names `../../etc/shadow`, an absolute path, or a symlink
(or symlinked folder) pointing out of the workspace would otherwise have that host file read,
stored, sent to the provider and shipped in archives. A symlink that stays inside is fine.
"""

from __future__ import annotations

import os
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
