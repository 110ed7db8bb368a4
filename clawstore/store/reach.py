"""Reachability: which objects a set of roots names, directly or through other objects; a head's closure.

The (deliberately conservative) rule and why: docs/gc-and-archives.md (Roots and reachability; Details by module)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError, StoreError
from clawstore.store.core import codec
from clawstore.store.core.ids import PREFIX
from clawstore.store.headdoc import head_fields, is_parted, iter_nodes

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore

_ID_RE = re.compile(rb"blake3:([0-9a-f]{64})")
_OVERLAP = len(b"blake3:") + 64  # an id split across two chunks is still found
_WHOLE_MAX = 4 << 20  # objects stored up to this size are read in one go, larger ones streamed
_JSON_START = frozenset(b"{[")
_BLANK = frozenset(b" \t\r\n")


def ids_in(data: bytes | memoryview) -> set[str]:
    """Hex digests of every object id written in `data`."""
    return {m.decode("ascii") for m in _ID_RE.findall(data)}


def _looks_json(head: bytes) -> bool:
    for byte in head:
        if byte not in _BLANK:
            return byte in _JSON_START
    return False


def named_by(store: ObjectStore, hexdigest: str) -> set[str] | None:
    """Hex ids one object names (empty for non-JSON); None if the object is not in the store.

    Reads are verified: a corrupt object raises CorruptObjectError (gc must not guess what it named).
    """
    oid = PREFIX + hexdigest
    try:
        stored = store.locate(oid)[2]
        if stored <= _WHOLE_MAX:
            data = store.get_bytes(oid)
            return ids_in(data) if _looks_json(data[:64]) else set()
        return _named_by_streamed(store, hexdigest)
    except MissingObjectError:
        return None


def _named_by_streamed(store: ObjectStore, hexdigest: str) -> set[str]:
    with store.open_object(PREFIX + hexdigest) as reader:
        found: set[str] = set()
        tail = b""
        first = True
        while chunk := reader.read(codec.CHUNK):
            if first:
                first = False
                if not _looks_json(chunk[:64]):
                    return set()
            window = tail + chunk
            found |= ids_in(window)
            tail = window[-_OVERLAP:]
        return found


class Reach:
    """An incrementally grown closure: `mark(roots)` adds everything the roots reach."""

    def __init__(self, store: ObjectStore):
        self.store = store
        self.marked: set[str] = set()  # hex digests of reached objects that exist
        self.missing: dict[str, str | None] = {}  # hex of a reached but absent object -> who named it

    def __contains__(self, hexdigest: str) -> bool:
        return hexdigest in self.marked

    def mark(self, roots: Iterable[str], named_from: str | None = None) -> int:
        """Mark `roots` (ids or hex digests) and their closure; returns how many objects were newly marked."""
        before = len(self.marked)
        stack: list[tuple[str, str | None]] = []
        for root in roots:
            hexdigest = root[len(PREFIX):] if root.startswith(PREFIX) else root
            stack.append((hexdigest, named_from))
        while stack:
            hexdigest, parent = stack.pop()
            if hexdigest in self.marked:
                continue
            names = named_by(self.store, hexdigest)
            if names is None:
                self.missing.setdefault(hexdigest, parent)
                continue
            self.missing.pop(hexdigest, None)
            self.marked.add(hexdigest)
            stack.extend((child, hexdigest) for child in names if child not in self.marked)
        return len(self.marked) - before


@dataclass
class HeadClosure:
    """A campaign head and everything it reaches: what a push of its ref or an export sends."""

    head_id: str
    head: dict[str, Any]  # its own fields (campaign, build_id...): its nodes are not held
    objects: set[str]  # hex digests of everything the head reaches
    actions: dict[str, str]  # node key -> record id, as the head has them


def head_closure(store: ObjectStore, head_id: str) -> HeadClosure:
    """Every object the head reaches (records, input documents, outputs, trees and their files)."""
    reach = Reach(store)
    reach.mark([head_id])
    if reach.missing:
        hexdigest, parent = sorted(reach.missing.items())[0]
        named = f" (named by {PREFIX}{parent})" if parent else ""
        raise StoreError(f"campaign closure is incomplete: object {PREFIX}{hexdigest}{named} is missing"
                         f"{f' (and {len(reach.missing) - 1} more)' if len(reach.missing) > 1 else ''}; "
                         "run claw fsck")
    doc = store.get_json(head_id)
    if not isinstance(doc, dict) or not (is_parted(doc) or isinstance(doc.get("nodes"), list)):
        raise StoreError(f"{head_id} is not a campaign head")
    # The nodes a part at a time: their actions are what is kept of them.
    actions = {str(n["key"]): str(n["record"]) for n in iter_nodes(doc, store.get_json)
               if isinstance(n, dict) and n.get("key") and n.get("record")}
    return HeadClosure(head_id, head_fields(doc), reach.marked, dict(sorted(actions.items())))
