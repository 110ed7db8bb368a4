"""The store document of one provider batch, and its ref `batches/<name>`: a durable claim on its nodes, so that a batch
survives any restart. Its fields and life: docs/batch.md (Details by module)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError
from clawstore.store.refs import RefConflict

if TYPE_CHECKING:
    from clawstore.store.store import Store

BATCH_TYPE = "provider_batch"
BATCH_FORMAT = 1
REF_PREFIX = "batches/"
KINDS = ("judge", "run")


@dataclass(frozen=True)
class BatchDoc:
    name: str
    kind: str
    base_url: str
    api_key_env: str | None
    model: str
    campaign_id: str
    build_id: str
    input_file_id: str
    keys: list[str]
    submitted_at: float
    batch_id: str | None = None
    status: str = "submitting"
    expires_at: float | None = None
    estimate_usd: float | None = None
    done: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    output_object: str | None = None
    error_object: str | None = None

    @property
    def ref(self) -> str:
        return REF_PREFIX + self.name

    @property
    def covered(self) -> set[str]:
        """Node keys (hex) this batch still stands for: neither stored nor given up."""
        return set(self.keys) - set(self.done) - set(self.released)

    def to_json(self) -> dict[str, Any]:
        return {"type": BATCH_TYPE, "format": BATCH_FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, value: Any, where: str) -> BatchDoc:
        if not isinstance(value, dict) or value.get("type") != BATCH_TYPE:
            raise StoreError(f"{where}: not a provider batch document")
        if value.get("format") != BATCH_FORMAT:
            raise StoreError(f"{where}: batch document format {value.get('format')!r} is not {BATCH_FORMAT} "
                             "(written by another claw version)")
        names = {f for f in cls.__dataclass_fields__}
        try:
            doc = cls(**{k: v for k, v in value.items() if k in names})
        except TypeError as exc:
            raise StoreError(f"{where}: malformed batch document: {exc}") from None
        if doc.kind not in KINDS or not all(isinstance(k, str) for k in doc.keys):
            raise StoreError(f"{where}: malformed batch document (kind or keys)")
        return doc


def write_new(store: Store, doc: BatchDoc) -> None:
    """Record a batch about to be created (its ref must not exist: two builds never share a file)."""
    store.set_ref(doc.ref, store.put_json(doc.to_json()), expected=None)


def read(store: Store, name: str) -> BatchDoc | None:
    target = store.get_ref(REF_PREFIX + name)
    return None if target is None else BatchDoc.from_json(store.get_json(target), f"ref {REF_PREFIX}{name}")


def pending(store: Store) -> list[BatchDoc]:
    """Every batch the store still records, oldest first."""
    return _read(store, store.list_refs(REF_PREFIX))


def _read(store: Store, refs: dict[str, str]) -> list[BatchDoc]:
    docs = [BatchDoc.from_json(store.get_json(target), f"ref {name}") for name, target in refs.items()]
    return sorted(docs, key=lambda d: (d.submitted_at, d.name))


# The last answer of `covered_now`: (the store, its batches' refs then), what they covered.
_last_covered: tuple[tuple[str, tuple[tuple[str, str], ...]], dict[str, BatchDoc]] | None = None


def covered_now(store: Store) -> dict[str, BatchDoc]:
    """`covered_keys(pending(store))`, asked before every paid node a build runs one by one (builder/claimed.py): the
    refs are listed each time (a batch another build submits meanwhile is seen), the documents read again only when
    one moved (a ref names its document by content, so the same refs cover the same keys). Not to be changed."""
    global _last_covered
    refs = store.list_refs(REF_PREFIX)
    if not refs:
        return {}
    listing = (str(store.root), tuple(refs.items()))
    last = _last_covered
    if last is not None and last[0] == listing:
        return last[1]
    covered = covered_keys(_read(store, refs))
    _last_covered = listing, covered
    return covered


def update(store: Store, name: str, change: Callable[[BatchDoc], BatchDoc]) -> BatchDoc | None:
    """Apply `change` to the batch's current document (compare-and-set, again if another process moved
    it meanwhile); the ref goes once nothing is covered. None when the batch is gone."""
    ref = REF_PREFIX + name
    while True:
        target = store.get_ref(ref)
        if target is None:
            return None
        doc = change(BatchDoc.from_json(store.get_json(target), f"ref {ref}"))
        try:
            if not doc.covered:
                store.delete_ref(ref, expected=target)
            else:
                store.set_ref(ref, store.put_json(doc.to_json()), expected=target)
            return doc
        except RefConflict:
            continue


def mark(store: Store, name: str, *, done: set[str] = frozenset(), released: set[str] = frozenset(),
         **fields: Any) -> BatchDoc | None:  # type: ignore[assignment]
    """Add keys to `done` / `released` and set other fields."""
    def change(doc: BatchDoc) -> BatchDoc:
        return replace(doc, done=sorted(set(doc.done) | set(done)),
                       released=sorted((set(doc.released) | set(released)) - set(doc.done) - set(done)), **fields)
    return update(store, name, change)


def covered_keys(docs: list[BatchDoc]) -> dict[str, BatchDoc]:
    """{node key (hex): the batch that stands for it}."""
    return {key: doc for doc in docs for key in doc.covered}


def now() -> float:
    return time.time()
