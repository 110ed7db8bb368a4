"""Why is a node stale? Compare its input document with the one of the last build at its address."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError, StoreError
from clawstore.graph.docdiff import diff_documents
from clawstore.graph.plan import HeadNodes, Node, address_id
from clawstore.graph.treediff import tree_changes
from clawstore.store import documents, headdoc
from clawstore.store.headdoc import LazyHeadNode

if TYPE_CHECKING:
    from clawstore.store.documents import HeadNode
    from clawstore.store.face import ObjectReader, StoreReader


def read_head(store: StoreReader, ref: str) -> tuple[str | None, HeadNodes]:
    """The campaign head's id and its nodes by address (None, {} when the campaign was never built)."""
    head_id = store.get_ref(ref)
    if not head_id:
        return None, {}
    with _damaged_head(ref, head_id):
        head = headdoc.read_head(store, head_id)
        return head_id, {address_id(n.kind, n.address): n for n in head.nodes}


@contextlib.contextmanager
def _damaged_head(ref: str, head_id: str) -> Iterator[None]:
    """A head that cannot be read, said as one line naming the ref and what to do."""
    try:
        yield
    except (StoreError, ValueError) as exc:
        why = "is not in the store" if isinstance(exc, MissingObjectError) else "is damaged"
        raise StoreError(f"ref {ref} points at {head_id}, which {why}: run `claw fsck --repair` "
                         "(it removes the ref; the next build reuses what the action cache still holds)") from None


class HeadOutOfOrder(Exception):
    """A head's nodes are not in case order (store/headdoc.py `place`): read it whole instead, from the start."""


class ReadRef:
    """HeadByCases reads its ref itself."""


READ_REF = ReadRef()


class HeadByCases:
    """A campaign head's nodes by address a window of cases at a time, the cases asked for in their sorted order:
    a head in parts holds its nodes in that order (store/headdoc.py `place`), so a window's nodes are read as its
    parts stream and those of other cases are dropped, and a read command holds a window's, not the campaign's.
    A head with its nodes inline (version 1) is read whole. `HeadOutOfOrder` when a node comes after a later case's;
    a damaged or missing part is the same StoreError as `read_head`'s, raised when it is reached (`finish` reads to
    the end: every node checked, as `read_head` does). `lazy` (the read commands): each node's record_doc decoded only
    when asked for (HeadNode.record_view; store/headdoc.py `lazy_part`), the head's parts typed as they are decoded."""

    def __init__(self, store: StoreReader, ref: str, whole: bool = False, lazy: bool = False,
                 head_id: str | None | ReadRef = READ_REF):
        """`head_id`: the head `ref` pointed at when it was read (a read command's `Store.reading_ref`); by default the
        ref is read here."""
        self.ref = ref
        self.head_id = store.get_ref(ref) if isinstance(head_id, ReadRef) else head_id
        self._store = store
        self._doc: Any = None
        self._whole: HeadNodes | None = None
        self._parts: Iterator[list[Any]] = iter(())
        self._part: list[Any] = []  # the part being read, and where in it
        self._pos = 0
        self._at = 0  # the head's node at _pos (`nodes[at]` in what a damaged one is said to be)
        self._case = ""  # the case of the last node looked at
        if not self.head_id:
            self._whole = {}
            return
        with _damaged_head(ref, self.head_id):
            self._doc = doc = store.get_json(self.head_id)  # (the head the ref named above, read once)
            if whole or not headdoc.is_parted(doc):
                self._read_whole()
                return
            documents.read_head({**headdoc.head_fields(doc), "nodes": []}, self._where)  # its own fields
            # A part gone is said now, before a build sends anything (a damaged one when it is read).
            lost = next((part for part in headdoc.part_ids(doc) if not store.has(part)), None)
            if lost is not None:
                raise MissingObjectError(lost)
            self._parts = headdoc.iter_parts(doc, lambda part: headdoc.lazy_part(store.get_bytes(part)),
                                             headdoc.lazy_node) if lazy else headdoc.iter_parts(doc, store.get_json)

    def _read_whole(self) -> None:
        nodes = documents.read_head(headdoc.inline_nodes(self._doc, self._store.get_json), self._where).nodes
        self._whole = {address_id(n.kind, n.address): n for n in nodes}

    @property
    def whole(self) -> bool:
        """Is the head held whole (inline, asked so, or read whole after its nodes came out of order)?"""
        return self._whole is not None

    @property
    def _where(self) -> str:
        return f"campaign head {self.head_id}"

    def window(self, cases: list[str], fall_back: bool = False) -> HeadNodes:
        """The nodes of these cases (sorted, each after every case of the windows asked for before) by address.
        `fall_back`: a head out of case order is read whole from here on, not HeadOutOfOrder (for a build, which cannot
        start again: a node the windows before missed was looked up in the action cache, as a head-less plan does)."""
        if self._whole is not None:
            return self._whole
        found: HeadNodes = {}
        try:
            self._read(cases[-1], set(cases), found)
        except HeadOutOfOrder:
            if not fall_back:
                raise
            with _damaged_head(self.ref, str(self.head_id)):
                self._read_whole()
            assert self._whole is not None
            return self._whole
        return found

    def finish(self, fall_back: bool = False) -> None:
        """Read the rest (the nodes of cases no window asked for): a damaged node or part is said as `read_head`
        says it, and a node out of order raises HeadOutOfOrder (`fall_back`: the head is read whole instead)."""
        if self._whole is not None:
            return
        try:
            self._read(None, set(), {})
        except HeadOutOfOrder:
            if not fall_back:
                raise
            with _damaged_head(self.ref, str(self.head_id)):
                self._read_whole()

    def _read(self, last: str | None, wanted: set[str], found: HeadNodes) -> None:
        """Type each node up to the first of a case after `last` (None: to the end), keeping those of `wanted`."""
        where, typed_node = self._where, documents.read_head_node
        with _damaged_head(self.ref, self.head_id):
            while True:
                if self._pos == len(self._part):
                    part = next(self._parts, None)
                    if part is None:
                        return
                    self._part, self._pos = part, 0
                    continue  # (a part of no nodes: the next)
                node = self._part[self._pos]
                lazy = type(node) is LazyHeadNode  # (typed as its part was read: store/headdoc.py lazy_part)
                address = node.address if lazy else node.get("address") if type(node) is dict else None
                # (its place's case: store/headdoc.py `place`, without the rest of it; a damaged node is said below)
                case = str(address.get("case_id")) if type(address) is dict else self._case
                if case < self._case:
                    raise HeadOutOfOrder(f"{where}: a node of case {case!r} after case {self._case!r}")
                self._case = case
                if last is not None and case > last:
                    return
                typed = node if lazy else typed_node(node, where, self._at)
                self._pos += 1
                self._at += 1
                if case in wanted:
                    found[address_id(typed.kind, typed.address)] = typed


# Sub-documents a node's input document names by id (stored when the node executes).
EXPANDED_FIELDS = frozenset({"target"})


def classify(node: Node, previous: HeadNode | None) -> str:
    """fresh | failed (last attempt was an infrastructure failure) | stale (inputs changed) | never-built."""
    if node.fresh:
        return "fresh"
    if node.record is not None:
        return "failed"
    return "stale" if previous is not None or node.unseen else "never-built"


def reasons(node: Node, previous: HeadNode | None, store: ObjectReader, force: bool = False) -> list[str]:
    """Human-readable reasons this node will execute (empty when it is fresh and not forced)."""
    if node.fresh:
        return ["forced (--force)"] if force else []
    if node.record is not None:
        error = node.record.get("error") or {}
        detail = f" ({error.get('code')}: {error.get('message')})" if error else ""
        return [f"last attempt ended {node.record.get('status')}{detail}; infrastructure failures are retried"]
    unseen = node.unseen
    if unseen:
        more = f" (and {len(unseen) - 1} more)" if len(unseen) > 1 else ""
        return [f"built before, but its {unseen[0]} is no longer in the store{more} "
                "(quarantined by claw fsck --repair, or collected): it is rebuilt"]
    if previous is None:
        return ["never built"]
    if previous.quarantined:
        return [f"quarantined by claw fsck --repair ({previous.quarantined}): it is rebuilt"]
    if previous.key == node.key:
        return ["built before, but its record is no longer in the store"]
    try:
        old = store.get_json(previous.key)
    except Exception:  # collected by gc, or never stored: nothing to diff against
        return [f"inputs changed (previous input document {previous.key[:19]}… is not in the store)"]
    known = node.subdocuments or {}  # the new side's sub-documents, not stored yet

    def resolve(oid: str) -> Any:
        return known[oid] if oid in known else store.get_json(oid)

    changes = diff_documents(old, node.document, resolve=resolve, expand=EXPANDED_FIELDS,
                             trees=lambda before, after: tree_changes(store, before, after))
    return [_unread_digest(node.document) if c == "runner.image_digest changed" else c for c in changes] or [
        "inputs changed"]


def _unread_digest(document: Any) -> str:
    """An OpenClaw run's image digest that is None now was not edited: the engine could not show the image (no
    engine reachable from this environment, or the image not in it), so no run's key can be matched."""
    runner = document.get("runner") if isinstance(document, dict) else None
    if not isinstance(runner, dict) or runner.get("image_digest") is not None:
        return "runner.image_digest changed"
    return (f"runner.image_digest could not be read: the container engine does not show image "
            f"{runner.get('image')!r} (none reachable from this environment, e.g. DOCKER_HOST unset, or the image "
            f"is not loaded in it): nothing was edited, but the run built with it is matched only once the engine "
            f"shows it again")
