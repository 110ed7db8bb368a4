"""A path inside a run's workspace as checks name it, written by a case (`relative_path`) or a run's own evidence."""

from __future__ import annotations

import posixpath


def normalize_relative_path(path: str) -> str:
    """`./a//b/../c.md` → `a/c.md`; leading slashes and the container prefix `/work/workspace/` go."""
    p = path.replace("\\", "/").strip()
    for prefix in ("/work/workspace/", "work/workspace/"):
        if p.startswith(prefix):
            p = p[len(prefix) :]
    p = posixpath.normpath(p.lstrip("/"))
    return "" if p == "." else p


def workspace_path_problem(path: str) -> str | None:
    """Why `path` names no file inside the workspace (it climbs out of it, or names its root), else None."""
    normal = normalize_relative_path(path)
    if normal == ".." or normal.startswith("../"):
        return f"{path} leaves the run's workspace (a '..' above its root): name a file inside it"
    if not normal:
        return f"{path} names the run's workspace itself, not a file in it"
    return None
