"""The files two stored trees differ by, as `claw explain` names them (an agent's workspace template edited)."""

from __future__ import annotations

from clawstore.errors import one_line
from clawstore.store.face import ObjectReader
from clawstore.store.trees import TreeEntry, parse_tree

SHOWN = 8  # files named; the rest counted


def tree_changes(store: ObjectReader, old: str, new: str) -> list[str]:
    """`path changed|added|removed` (a mode alone: `path mode 644 -> 755`) for each entry that differs, in path
    order; [] when either tree cannot be read (collected, damaged): the caller says the ids alone."""
    try:
        before, after = _entries(store, old), _entries(store, new)
    except Exception:  # (any reason a tree is not readable here: nothing to name)
        return []
    changes = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        path = one_line(name, 200)  # (a file's name is any bytes but / and NUL: none forges explain's lines)
        if a is None:
            changes.append(f"{path} added")
        elif b is None:
            changes.append(f"{path} removed")
        elif (a.type, a.object, a.target) != (b.type, b.object, b.target):
            changes.append(f"{path} changed")
        elif a.mode != b.mode:
            changes.append(f"{path} mode {a.mode & 0o7777:o} -> {b.mode & 0o7777:o}")
    if len(changes) > SHOWN:
        changes[SHOWN:] = [f"{len(changes) - SHOWN} more"]
    return changes


def _entries(store: ObjectReader, oid: str) -> dict[str, TreeEntry]:
    return {entry.path: entry for entry in parse_tree(oid, store.get_bytes(oid))}
