"""SQL text the manifest writes itself (paths, ids, a build's columns): one way to quote a value."""

from __future__ import annotations


def literal(value: str | None) -> str:
    """A SQL string literal (quotes doubled), or NULL."""
    return "NULL" if value is None else "'" + str(value).replace("'", "''") + "'"
