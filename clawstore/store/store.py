"""`Store`: the one object other layers use (see docs/design/contracts.md and docs/store.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError
from clawstore.store import actions, refs, trees
from clawstore.store.core import adopt, locks, reserve
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.index import IndexSnapshot
from clawstore.store.core.objects import ObjectStore
from clawstore.store.documents import KeptApart, RecordDoc
from clawstore.store.refs import UNTRUSTED_REFS
from clawstore.store.services.migrate import open_layout
from clawstore.store.trees import TreeEntry

_READ_AGAIN = 5  # reading_ref: at most this many leases taken for a ref that moved on each time, then read unleased

if TYPE_CHECKING:  # (reach and transfer are imported when first used: `import clawstore.store` stays quick)
    from clawstore.store.reach import HeadClosure
    from clawstore.store.services.transfer import Incoming, SealedPack


class Store(ObjectStore):
    """A content-addressed store directory: objects, trees, action cache, refs, leases.

    Objects: put_bytes / put_file / put_stream / put_json, get_bytes / get_json / open_object, has,
    iter_objects, object_sizes, batch, group_commit, flush, when_durable (inherited from ObjectStore).
    A format-1 store is upgraded to format 2 when first opened (migrate.py).
    """

    def __init__(self, root: Path | str, *, create: bool = True, level: int = 3, threads: int = 0):
        path = Path(root)
        open_layout(path, create=create)
        super().__init__(path, level=level, threads=threads)

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    # --- trees --------------------------------------------------------------------------------
    def put_tree(self, directory: Path | str, *, escape_names: bool = False) -> str:
        return trees.put_tree(self, directory, escape_names)

    def read_tree(self, oid: str) -> list[TreeEntry]:
        return trees.read_tree(self, oid)

    def checkout(self, oid: str, dest: Path | str, *, allow_external_links: bool = False) -> None:
        trees.checkout(self, oid, dest, allow_external_links=allow_external_links)

    # --- action cache -------------------------------------------------------------------------
    def get_action(self, key: str) -> RecordDoc | None:
        return actions.get_action(self, key)

    def get_action_record_id(self, key: str, look_again: bool = True) -> str | None:
        """The record `key` points at (None: no entry); `look_again=False`: a miss does not list the index
        again (the caller refreshed it just before)."""
        return actions.get_action_record_id(self, key, look_again)

    def put_action(self, key: str, record: RecordDoc | dict[str, Any]) -> str:
        return actions.put_action(self, key, record)

    def iter_actions(self) -> Iterator[tuple[str, str | None]]:
        return actions.iter_actions(self)

    def entry_digests(self) -> dict[bytes, bytes]:
        """{key digest: record digest} of every entry (bulk readers: a push)."""
        return actions.all_entry_digests(self)

    # --- refs ---------------------------------------------------------------------------------
    def get_ref(self, name: str) -> str | None:
        return refs.get_ref(self, name)

    def set_ref(self, name: str, value: str, expected: str | None | refs._Any = refs.ANY) -> None:
        refs.set_ref(self, name, value, expected)

    def delete_ref(self, name: str, expected: str | None | refs._Any = refs.ANY) -> bool:
        return refs.delete_ref(self, name, expected)

    def list_refs(self, prefix: str = "") -> dict[str, str]:
        return refs.list_refs(self, prefix)

    # --- reachability -------------------------------------------------------------------------
    def head_closure(self, head_id: str) -> HeadClosure:
        """Everything a campaign head reaches, its actions too (StoreError if any of it is missing)."""
        from clawstore.store import reach

        return reach.head_closure(self, head_id)

    def lacking_in_closure(self, roots: Iterable[str]) -> set[str]:
        """Hex ids of the objects the roots reach, through what this store holds, that it lacks."""
        from clawstore.store.reach import Reach

        walk = Reach(self)
        walk.mark(roots)
        return set(walk.missing)

    def closure_digests(self, roots: Iterable[str]) -> set[bytes]:
        """The digests of what the roots reach, themselves included, of what this store holds (what it lacks is left
        out: the receiving side's checks name it)."""
        from clawstore.store.reach import Reach

        walk = Reach(self)
        walk.mark(roots)
        packed = walk.marked_digests()
        return {packed[at:at + 32] for at in range(0, len(packed), 32)}

    # --- transfer (remote/: push and pull) -----------------------------------------------------
    def refresh(self) -> None:
        """Take in what other processes committed since this one last looked."""
        self.runtime.index.refresh()

    def committed(self, unless: frozenset[str] | None = None) -> IndexSnapshot | None:
        """Every object and entry committed, frozen at one instant (each entry's record among them);
        None when the index still holds exactly the segments `unless` names (nothing committed since a
        snapshot's `loaded`): then not even a copy is made."""
        index = self.runtime.index
        index.refresh()
        return None if index.loaded == unless else index.snapshot()

    def sealed_packs(self, skip: Container[str] = ()) -> Iterator[SealedPack]:
        """This store's sealed packs not in `skip`, largest first, each with its objects (transfer.py)."""
        from clawstore.store.services import transfer

        return transfer.sealed_packs(self, skip)

    def make_pack(self, digests: Iterable[bytes], work: Path, content: bytes | None = None) -> Path:
        """A sealed pack in `work` of these objects, then one of `content` (transfer.make_pack)."""
        from clawstore.store.services import transfer

        return transfer.make_pack(self, digests, work, content)

    def receive(self) -> Incoming:
        """Somewhere for a pull's packs: checked whole, then taken in (transfer.Incoming)."""
        from clawstore.store.services import transfer

        return transfer.Incoming(self)

    def add_entries(self, entries: Mapping[str, str]) -> None:
        """Point keys at records a pull verified, where this store's own entry gives way (transfer.py)."""
        from clawstore.store.services import transfer

        transfer.add_entries(self, entries)

    def keep_apart(self, signer: str | None, actions: dict[str, str], refs: dict[str, str], digest: str | None,
                   signers: list[str] | None = None) -> str:
        """Store entries and refs from an untrusted signer (an archive, a remote pack: `digest`) as one object
        named by the ref `untrusted/<digest hex>` (a gc root); that ref's name. A pull's refs, which several
        signers' packs may reach (`signers`), have no digest of their own: the ref is named by the object."""
        oid = self.put_json(KeptApart(signer, actions, refs, list(signers) if signers is not None else None,
                                      digest).to_json())
        name = UNTRUSTED_REFS + (digest or oid)[len(PREFIX):]
        self.set_ref(name, oid)
        return name

    # --- coordination -------------------------------------------------------------------------
    def keep_reserve(self) -> bool:
        """Allocate the store's reserve of space if it has none (reserve.py); False if there is no room."""
        return reserve.keep_reserve(self.root)

    def release_reserve(self) -> bool:
        """Give the reserve's space back, for the writes a full disk refused (reserve.py)."""
        return reserve.release_reserve(self.root)

    def adopt_orphans(self) -> adopt.AdoptReport:
        """Name what writers killed before their commit had finished (adopt.py); cheap when none were."""
        return adopt.adopt_orphans(self)

    def lease(self, purpose: str) -> contextlib.AbstractContextManager[locks.LeaseInfo]:
        return locks.lease(self.root, purpose)

    def keeping(self, oid: str) -> contextlib.AbstractContextManager[locks.LeaseInfo]:
        """A lease naming `oid` (as `reading_ref`'s names a head): gc keeps it and all it reaches until the block ends.
        For an object a command is about to name by a ref, read elsewhere than in a ref of this store (a pull: the
        remote's head, which the store may hold already, in packs no lease window covers)."""
        return locks.lease(self.root, locks.READING_HEAD_LEASE_PREFIX + oid)

    @contextlib.contextmanager
    def reading_ref(self, name: str) -> Iterator[str | None]:
        """The object ref `name` points at, kept from a gc until the block ends: a lease naming it (as a build reading
        its previous head holds), taken after the ref is read and kept only if the ref still points there once the
        lease is seen (a gc sweeping then kept it as a ref, any later one keeps it as the lease's); else read again.
        A store this user cannot write is read without one. Before session 74 `claw status` and `claw report` held
        none: a gc after a build moved the ref deleted the head they were reading, and they said the store was
        damaged (tests/gc/test_head_readers.py)."""
        value = self.get_ref(name)
        for _ in range(_READ_AGAIN):
            if value is None:
                break
            with contextlib.ExitStack() as held:
                try:
                    held.enter_context(locks.lease(self.root, locks.READING_HEAD_LEASE_PREFIX + value))
                except (OSError, StoreError):  # (a store this reader cannot write, a full disk: read as before)
                    break
                now = self.get_ref(name)
                if now == value:
                    yield value
                    return
            value = now
        yield value

    def list_leases(self) -> list[locks.LeaseInfo]:
        return locks.list_leases(self.root)

    def exclusive(self, name: str, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        return locks.exclusive(self.root, name, timeout)
