"""Reachability: which objects a set of roots names, directly or through other objects; a head's closure.

The (deliberately conservative) rule and why: docs/gc-and-archives.md (Roots and reachability; Details by module)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError, StoreError
from clawstore.store import edges
from clawstore.store.core import codec
from clawstore.store.core.ids import PREFIX, BadObjectIdError, is_hex64
from clawstore.store.core.index import HeldObjects, Loc
from clawstore.store.edges import ID_RE, looks_json
from clawstore.store.headdoc import head_fields, is_parted, iter_nodes

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore

_OVERLAP = len(b"blake3:") + 64  # an id split across two chunks is still found
_ID = 32
# Bytes of the index's object rows held for look-ups by a cached walk (and fsck): 52 an object, 1.3 M objects; past it
# the biggest tables are looked up in place, a read a look-up.
HELD = 64 << 20
_WHOLE_MAX = 4 << 20  # objects stored up to this size are read in one go, larger ones streamed


def ids_in(data: bytes | memoryview) -> set[str]:
    """Hex digests of every object id written in `data`."""
    return {m.decode("ascii") for m in ID_RE.findall(data)}


def named_by(store: ObjectStore, hexdigest: str) -> set[str] | None:
    """Hex ids one object names (empty for non-JSON); None if the object is not in the store.

    Reads are verified: a corrupt object raises CorruptObjectError (gc must not guess what it named).
    """
    oid = PREFIX + hexdigest
    try:
        stored = store.locate(oid)[2]
        if stored <= _WHOLE_MAX:
            data = store.get_bytes(oid)
            return ids_in(data) if looks_json(data[:64]) else set()
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
                if not looks_json(chunk[:64]):
                    return set()
            window = tail + chunk
            found |= ids_in(window)
            tail = window[-_OVERLAP:]
        return found


class Reach:
    """An incrementally grown closure: `mark(roots)` adds everything the roots reach (held as 32-byte digests)."""

    def __init__(self, store: ObjectStore, cached: bool = False):
        self.store = store
        self._marked: set[bytes] = set()  # digests of reached objects that exist
        self.missing: dict[str, str | None] = {}  # hex of a reached but absent object -> who named it
        # With `cached`: what an object names is taken from its pack's edges file when that verifies (edges.py),
        # one pack's file held at a time (the walk goes pack by pack); packs whose file does not are read.
        self._cached = cached
        self._uncached: set[str] = set()
        self.loads = 0  # edges files loaded (a pack's again when the walk comes back to it)
        self._held: tuple[frozenset[str], Callable[[bytes], Loc | None]] | None = None
        # pack -> a byte a row of its edges file (1 once the walk marked it), then one an other id (1 once stacked)
        self._seen: dict[str, bytearray] = {}

    def __contains__(self, hexdigest: str) -> bool:
        return bytes.fromhex(hexdigest) in self._marked

    def __len__(self) -> int:
        return len(self._marked)

    def reached(self, digest: bytes) -> bool:
        return digest in self._marked

    @property
    def digests(self) -> AbstractSet[bytes]:
        """The reached objects' digests, as held (read only: a caller tests membership in a loop)."""
        return self._marked

    @property
    def marked(self) -> set[str]:
        """Hex digests of the reached objects (made on each call: callers that only ask use `in`, `reached`)."""
        return {digest.hex() for digest in self._marked}

    def mark(self, roots: Iterable[str], named_from: str | None = None) -> int:
        """Mark `roots` (ids or hex digests) and their closure; returns how many objects were newly marked.
        Cached, objects of a pack with an edges file wait until the walk takes that pack up: one file held at once."""
        marked = self._marked
        before = len(marked)
        parent = _digest(named_from) if named_from is not None else None
        # (digest, who named it, its offset in the pack taken up when it waited for that pack, else None)
        stack: list[tuple[bytes, bytes | None, int | None]] = [(_digest(root), parent, None) for root in roots]
        waiting: dict[str, list[tuple[bytes, bytes | None, int | None]]] = {}  # pack -> its objects left to walk
        current: edges.PackEdges | None = None
        find, uncached = self._finder() if self._cached else None, self._uncached
        while True:
            while stack:
                digest, parent, offset = stack.pop()
                if digest in marked:
                    continue
                if offset is None and find is not None and (loc := find(digest)) is not None \
                        and loc[0] not in uncached:  # (what the index lacks is read)
                    if current is None or current.pack != loc[0]:
                        waiting.setdefault(loc[0], []).append((digest, parent, loc[1]))
                        continue
                    offset = loc[1]
                row = current.position(digest, offset) if offset is not None and current is not None else None
                if row is not None:  # (the pack's own edges followed by row, what it names elsewhere stacked)
                    self._walk(current, [row], stack, find)
                    continue
                names = named_by(self.store, digest.hex())  # (no file that verifies covers it: read)
                if names is None:
                    self.missing.setdefault(digest.hex(), parent.hex() if parent is not None else None)
                    continue
                children = [bytes.fromhex(hexdigest) for hexdigest in names]
                if self.missing:
                    self.missing.pop(digest.hex(), None)
                marked.add(digest)
                stack.extend((child, digest, None) for child in children if child not in marked)
            if not waiting:
                return len(marked) - before
            pack, stack = waiting.popitem()
            current = None  # (released before the next is read)
            runtime = self.store.runtime
            current = edges.load(self.store.root, runtime.packs_dir, pack)
            if current is None:  # (a pack sealed before writers wrote them, or by a writer killed first)
                current = edges.build(self.store.root, runtime.packs_dir, runtime.tmp_dir, pack)
            self.loads += 1
            if current is None:
                self._uncached.add(pack)  # its objects are read
            else:  # those the file covers walked from their rows at once, the others left on the stack
                stack = self._walk(current, stack, [], find)

    def _finder(self) -> Callable[[bytes], Loc | None]:
        """The index's object look-up as it stands now, without listing it again on a miss (what it lacks is asked the
        long way, by named_by), its big tables' rows held in memory up to HELD bytes: the walk looks up every object it
        reaches. Made again only when the index changed since the last mark."""
        index = self.store.runtime.index
        index.lacking(())  # (one look for changes, as a look-up makes)
        view = index.snapshot()
        if self._held is None or self._held[0] != view.loaded:
            self._held = None  # (released before the next is read)
            self._held = (view.loaded, HeldObjects(view.entries, HELD).find)
        return self._held[1]

    def _walk(self, found: edges.PackEdges, starts: list[int] | list[tuple[bytes, bytes | None, int | None]],
              stack: list[tuple[bytes, bytes | None, int | None]], find: Callable[[bytes], Loc | None]
              ) -> list[tuple[bytes, bytes | None, int | None]]:
        """Mark the objects at `starts` (rows of the pack `found` is about, or stacked objects with their offsets in it)
        and what they reach inside that pack, by row numbers over the file's arrays (no list of ids made an object); an
        id named that another pack holds, or that the file does not cover, goes on `stack` to be looked up, and so do
        starts the file does not cover (returned: `stack`). Rows marked are remembered a pack at a time (a byte a row),
        so a pack the walk comes back to is not walked again; an id of another pack is stacked once a pack."""
        rows, known, covers, tokens, edge_at = len(found.offsets), found.known, found.covers, found.tokens, found.starts
        seen = self._seen.get(found.pack)  # (its rows, then the other ids it names: each of them stacked once)
        if seen is None or len(seen) != len(known) // _ID:
            seen = self._seen[found.pack] = bytearray(len(known) // _ID)
        todo: list[int] = []
        offsets, marked = found.offsets, self._marked
        for start in starts:  # (rows, or what waited for this pack: its rows found by offset, as `position` does)
            if isinstance(start, int):
                row = start
            else:
                digest, _, offset = start
                row = bisect_left(offsets, offset) if offset is not None else rows
                if row == rows or offsets[row] != offset or not covers[row] \
                        or known[row * _ID:(row + 1) * _ID] != digest:
                    if digest not in marked:
                        stack.append(start)
                    continue
            if not seen[row]:
                seen[row] = 1
                todo.append(row)
        new = list(todo)
        while todo:
            at = todo.pop()
            for token in tokens[edge_at[at]:edge_at[at + 1]]:
                if token < rows and covers[token]:
                    if seen[token]:
                        continue
                    child = known[token * _ID:token * _ID + _ID]
                    if find(child) is not None:  # (the index says what is there: one it lacks is asked below)
                        seen[token] = 1
                        todo.append(token)
                        new.append(token)
                        continue
                elif token >= rows:
                    if seen[token]:
                        continue
                    seen[token] = 1
                    child = known[token * _ID:token * _ID + _ID]
                else:
                    child = known[token * _ID:token * _ID + _ID]
                if child not in marked:
                    stack.append((child, known[at * _ID:at * _ID + _ID], None))
        digests = [known[at * _ID:at * _ID + _ID] for at in new]
        marked.update(digests)
        if self.missing:
            for digest in digests:
                self.missing.pop(digest.hex(), None)
        return stack


def _digest(root: str) -> bytes:
    hexdigest = root[len(PREFIX):] if root.startswith(PREFIX) else root
    if not is_hex64(hexdigest):
        raise BadObjectIdError(f"not a valid object id: {root!r} (expected blake3:<64 hex digits>)")
    return bytes.fromhex(hexdigest)


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
