"""Why is a node stale? Compare its input document with the one of the last build at its address."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError, StoreError
from clawstore.graph.docdiff import diff_documents
from clawstore.graph.plan import HeadNodes, Node, address_id
from clawstore.store import headdoc

if TYPE_CHECKING:
    from clawstore.store.documents import HeadNode
    from clawstore.store.face import ObjectReader, StoreReader


def read_head(store: StoreReader, ref: str) -> tuple[str | None, HeadNodes]:
    """The campaign head's id and its nodes by address (None, {} when the campaign was never built)."""
    head_id = store.get_ref(ref)
    if not head_id:
        return None, {}
    try:
        head = headdoc.read_head(store, head_id)
        return head_id, {address_id(n.kind, n.address): n for n in head.nodes}
    except (StoreError, ValueError) as exc:
        why = "is not in the store" if isinstance(exc, MissingObjectError) else "is damaged"
        raise StoreError(f"ref {ref} points at {head_id}, which {why}: run `claw fsck --repair` "
                         "(it removes the ref; the next build reuses what the action cache still holds)") from None



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

    changes = diff_documents(old, node.document, resolve=resolve, expand=EXPANDED_FIELDS)
    return changes or ["inputs changed"]
