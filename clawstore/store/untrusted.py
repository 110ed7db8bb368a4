"""Content imported with --untrusted, kept apart until its signer is trusted.

An untrusted import publishes its objects (they are only bytes under their ids) but not its
action-cache entries or refs: those go into one object named by the ref `untrusted/<archive digest>`
(a gc root), so no build reuses them; each build first moves in the sets whose signer the user now
trusts (`claw trust add KEY`), after which the next build sends no request for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clawstore.store.documents import KeptApart, read_kept_apart
from clawstore.store.refs import UNTRUSTED_REFS

if TYPE_CHECKING:
    from clawstore.store.store import Store

CAMPAIGN_REFS = "campaigns/"


def kept_apart(store: Store) -> dict[str, KeptApart]:
    """{ref name: the kept-apart set} for every untrusted import in the store."""
    found = {}
    for name, oid in store.list_refs(UNTRUSTED_REFS).items():
        doc = read_kept_apart(store.get_json(oid), f"kept-apart set {oid} (ref {name})")
        if doc is not None:
            found[name] = doc
    return found


def kept_apart_head(store: Any, campaign_id: str) -> tuple[str, str] | None:
    """(head id, signer) of the campaign's head imported with --untrusted, if that is all there is.
    In the usual store (no untrusted import) only the refs' names are read."""
    list_refs = getattr(store, "list_refs", None)
    if list_refs is None or not list_refs(UNTRUSTED_REFS):
        return None
    return kept_apart_heads(store).get(campaign_id)


def kept_apart_heads(store: Store) -> dict[str, tuple[str, str]]:
    """{campaign id: (head object id, signer)} for every campaign head kept apart and not also the
    campaign's trusted head: what query, report and view show marked as untrusted."""
    heads: dict[str, tuple[str, str]] = {}
    for _name, doc in sorted(kept_apart(store).items()):
        for ref, oid in doc.refs.items():
            if not ref.startswith(CAMPAIGN_REFS):
                continue
            campaign = ref[len(CAMPAIGN_REFS):]
            if store.get_ref(ref) != oid and store.has(oid):
                heads.setdefault(campaign, (oid, doc.signer_text()))
    return heads


def untrusted_results(store: Store, trusts: Callable[[str | None], bool] | None = None) -> dict[str, str]:
    """{action key: who signed it} of every entry kept apart whose signer is not trusted (yet): the nodes a build
    pays for again though the store holds their results. Empty at once when nothing was imported --untrusted."""
    if not store.list_refs(UNTRUSTED_REFS):
        return {}
    trusts = trusts or _user_trusts()
    return {key: doc.signer_text() for _name, doc in sorted(kept_apart(store).items())
            if not all(trusts(signer) for signer in doc.every_signer) for key in doc.actions}


def _user_trusts() -> Callable[[str | None], bool]:
    from clawstore.store.services.archive_import import user_trusts

    return user_trusts


def promote_trusted(store: Store, trusts: Callable[[str | None], bool] | None = None) -> list[str]:
    """Publish the entries and refs of every kept-apart import whose signer is trusted now; returns the
    signers moved in. (Its entries were verified against their input documents when imported.) What an archive's
    entries name beyond its head (a killed build's results) is kept by `imports/archive-<id>`, the ref its import
    would have set trusted (`keep_beyond_heads`), before the kept-apart set's ref goes."""
    names = store.list_refs(UNTRUSTED_REFS)
    if not names:
        return []  # the usual case: no import of the user's cryptography setup (nor of the archive code) at all
    from clawstore.store.services.archive_import import ImportReport, write_actions, write_refs

    trusts = trusts or _user_trusts()
    moved = []
    for name, doc in sorted(kept_apart(store).items()):
        if not all(trusts(signer) for signer in doc.every_signer):  # a pull's refs: every signer of its packs
            continue
        report = ImportReport(summary=None)  # type: ignore[arg-type]  # counts only
        write_actions(store, doc.actions, report)
        write_refs(store, doc.refs, report)
        keep_beyond_heads(store, doc)
        store.delete_ref(name)
        moved.append(str(doc.signer))
    return moved


def keep_beyond_heads(store: Store, doc: KeptApart) -> str | None:
    """Keep from gc the records a kept-apart archive's entries name that its campaign heads do not, as its import
    does once trusted (store/kept.py: the same records, so the same ref `imports/archive-<id>`); the ref, None when
    there is none. Before session 77 nothing kept them once moved in: a build that did not adopt them (another case's,
    another campaign's), a `claw gc --grace 0`, and the campaign's build paid for them again
    (tests/gc/test_archive_elsewhere.py). A set with no head (a pull's: its packs' entries, or its refs alone) keeps
    nothing here."""
    from clawstore.store.kept import beyond_heads, keep_imported

    heads = sorted({target for ref, target in doc.refs.items() if ref.startswith(CAMPAIGN_REFS)})
    if not heads or not doc.actions:
        return None
    return keep_imported(store, "archive", beyond_heads(store, heads, doc.actions))
