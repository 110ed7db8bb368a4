"""Human-readable differences between two input documents (what `claw explain` prints)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clawstore.errors import one_line
from clawstore.values.urls import shown_url

_SHORT = 40  # scalars longer than this are reported as "changed" rather than printed


def _show(value: Any) -> str:
    if isinstance(value, str):
        value = shown_url(value)  # (a base_url stored before session 62 may hold a password)
        if value.startswith("blake3:"):
            return value[:19] + "…"
        return repr(value) if len(value) <= _SHORT else f"<{len(value)} chars>"
    text = repr(value)
    return text if len(text) <= _SHORT else f"<{type(value).__name__}>"


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("blake3:")


def _is_short(value: Any) -> bool:
    return not isinstance(value, (dict, list)) and (not isinstance(value, str) or len(value) <= _SHORT
                                                    or value.startswith("blake3:"))


TREE_FIELDS = frozenset({"agent_tree"})  # fields holding a tree's id: an OpenClaw agent's workspace template


def diff_documents(old: Any, new: Any, path: str = "", resolve: Callable[[str], Any] | None = None,
                   expand: frozenset[str] = frozenset(),
                   trees: Callable[[str, str], list[str]] | None = None) -> list[str]:
    """Every changed leaf path, e.g. `input.messages[0].content changed`, `runner.temperature 0 -> 0.2`.

    A field named in `expand` may hold the id of a stored sub-document (a judge node keys its evaluation
    target by id); `resolve(id)` loads it so the diff reports the changed field inside it. A field named in
    TREE_FIELDS holds a tree's id: `trees(old, new)` names the files that differ (an empty list: not said)."""
    if old == new:
        return []
    where = path or "document"
    if path in expand and resolve is not None and _is_id(old) and _is_id(new):
        try:
            return diff_documents(resolve(old), resolve(new), path, resolve, expand, trees)
        except Exception:  # not stored (never executed, or collected): say what we know
            return [f"{where} {_show(old)} -> {_show(new)}"]
    if path.rsplit(".", 1)[-1] in TREE_FIELDS and trees is not None and _is_id(old) and _is_id(new):
        files = trees(old, new)
        if files:
            return [f"{where} {_show(old)} -> {_show(new)}: {', '.join(files)}"]
    if isinstance(old, dict) and isinstance(new, dict):
        if path == "attachments":
            return _diff_attachments(old, new)
        changes: list[str] = []
        for key in sorted(set(old) | set(new)):
            if key in old and key in new and old[key] == new[key]:
                continue  # (nothing below it changed: its path not even made; a stale run's document differs by a leaf)
            sub = f"{path}.{_name(key)}" if path else _name(key)
            if key not in old:
                changes.append(f"{sub} added" + (f" ({_show(new[key])})" if _is_short(new[key]) else ""))
            elif key not in new:
                changes.append(f"{sub} removed")
            else:
                changes.extend(diff_documents(old[key], new[key], sub, resolve, expand, trees))
        return changes
    if isinstance(old, list) and isinstance(new, list):
        changes = []
        if len(old) != len(new):
            changes.append(f"{where}: {len(old)} -> {len(new)} items")
        for index, (a, b) in enumerate(zip(old, new, strict=False)):
            changes.extend(diff_documents(a, b, f"{path}[{index}]", resolve, expand, trees))
        return changes
    if _is_short(old) and _is_short(new):
        return [f"{where} {_show(old)} -> {_show(new)}"]
    return [f"{where} changed"]


def _name(key: Any) -> str:
    """A key or an attachment's name as explain prints it: a name taken from a file or a config may hold any
    character, and one holding a line break must not forge explain's lines (nor an escape reach the terminal)."""
    return one_line(str(key), 200)


def _diff_attachments(old: dict, new: dict) -> list[str]:
    changes = []
    for key in sorted(set(old) | set(new)):
        name = _name(key)
        if key not in old:
            changes.append(f"attachment {name} added")
        elif key not in new:
            changes.append(f"attachment {name} removed")
        elif old[key] != new[key]:
            changes.append(f"attachment {name}: {_show(old[key].get('object'))} -> {_show(new[key].get('object'))}")
    return changes
