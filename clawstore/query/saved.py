"""Saved queries: `<workspace root>/queries/NAME.sql` first, then the copy shipped in the package.

The repository's `queries/` is a symbolic link to `clawstore/query/saved/`, so the saved queries have one
source and an installed claw ships them.
"""

from __future__ import annotations

import re
from pathlib import Path

from clawstore.errors import UsageError

PACKAGED = Path(__file__).parent / "saved"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def query_dirs(workspace_root: Path) -> list[Path]:
    return [workspace_root / "queries", PACKAGED]


def is_packaged(path: Path) -> bool:
    """Is this saved query the copy shipped with claw (not one a workspace brings)?"""
    return path.parent.resolve() == PACKAGED.resolve()


def available(workspace_root: Path) -> list[str]:
    names: set[str] = set()
    for directory in query_dirs(workspace_root):
        if directory.is_dir():
            names.update(p.stem for p in directory.glob("*.sql") if p.is_file())
    return sorted(names)


def looks_like_name(text: str) -> bool:
    return bool(_NAME_RE.match(text.strip()))


def resolve_sql(sql_or_name: str, workspace_root: Path) -> tuple[str, Path | None]:
    """(SQL text, file it came from or None). A bare word must name a saved query."""
    if not looks_like_name(sql_or_name):
        return sql_or_name, None
    name = sql_or_name.strip()
    for directory in query_dirs(workspace_root):
        path = directory / f"{name}.sql"
        if path.exists() and not path.is_file():  # (it was "no saved query named …", listing that very name)
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise UsageError(f"{path}: not a saved query ({kind})")
        if path.is_file():
            try:
                return path.read_text(encoding="utf-8"), path
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"{path}: cannot read saved query ({exc})") from None
    names = ", ".join(available(workspace_root)) or "none"
    raise UsageError(f"no saved query named {name!r} (saved queries: {names})")
