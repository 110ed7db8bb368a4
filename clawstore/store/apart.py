"""Content imported with --untrusted, kept apart until its signer is trusted.

An untrusted import publishes its objects (they are only bytes under their ids) but not its
action-cache entries or refs: those go into one object named by the ref `untrusted/<archive digest>`
(a gc root), so no build reuses them; each build first moves in the sets whose signer the user now
trusts (`claw trust add KEY`), after which the next build sends no request for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clawstore.store.archive_import import ImportReport, write_actions, write_refs
from clawstore.store.refs import UNTRUSTED_REFS

if TYPE_CHECKING:
    from clawstore.store.store import Store

CAMPAIGN_REFS = "campaigns/"


def kept_apart(store: Store) -> dict[str, dict[str, Any]]:
    """{ref name: the kept-apart document} for every untrusted import in the store."""
    found = {}
    for name, oid in store.list_refs(UNTRUSTED_REFS).items():
        doc = store.get_json(oid)
        if isinstance(doc, dict) and doc.get("kind") == "untrusted-import":
            found[name] = doc
    return found


def kept_apart_head(store: Any, campaign_id: str) -> tuple[str, str] | None:
    """(head id, signer) of the campaign's head imported with --untrusted, if that is all there is.
    In the usual store (no untrusted import) only the refs' names are read."""
    list_refs = getattr(store, "list_refs", None)
    if list_refs is None or not list_refs(UNTRUSTED_REFS):
        return None
    return kept_apart_heads(store).get(campaign_id)


def signer_text(doc: dict[str, Any]) -> str:
    """Who signed a kept-apart set, for views and reports ("unsigned" when nobody did)."""
    signers = doc.get("signers") or [doc.get("signer")]
    return ", ".join(sorted({str(s) if s else "unsigned" for s in signers}))


def kept_apart_heads(store: Store) -> dict[str, tuple[str, str]]:
    """{campaign id: (head object id, signer)} for every campaign head kept apart and not also the
    campaign's trusted head: what query, report and view show marked as untrusted."""
    heads: dict[str, tuple[str, str]] = {}
    for _name, doc in sorted(kept_apart(store).items()):
        refs = doc.get("refs")
        for ref, oid in (refs.items() if isinstance(refs, dict) else ()):
            if not (isinstance(ref, str) and ref.startswith(CAMPAIGN_REFS) and isinstance(oid, str)):
                continue
            campaign = ref[len(CAMPAIGN_REFS):]
            if store.get_ref(ref) != oid and store.has(oid):
                heads.setdefault(campaign, (oid, signer_text(doc)))
    return heads


def promote_trusted(store: Store, trusts: Callable[[str | None], bool] | None = None) -> list[str]:
    """Publish the entries and refs of every kept-apart import whose signer is trusted now; returns the
    signers moved in. (Its entries were verified against their input documents when imported.)"""
    names = store.list_refs(UNTRUSTED_REFS)
    if not names:
        return []  # the usual case: no import of the user's cryptography setup at all
    if trusts is None:
        from clawstore.store.archive_import import user_trusts

        trusts = user_trusts
    moved = []
    for name, doc in sorted(kept_apart(store).items()):
        signers = doc.get("signers") or [doc.get("signer")]  # a pull's refs: every signer of its packs
        if not all(trusts(signer) for signer in signers):
            continue
        report = ImportReport(summary=None)  # type: ignore[arg-type]  # counts only
        write_actions(store, doc.get("actions") or {}, report)
        write_refs(store, doc.get("refs") or {}, report)
        store.delete_ref(name)
        moved.append(str(doc.get("signer")))
    return moved
