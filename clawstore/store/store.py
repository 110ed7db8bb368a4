"""`Store`: the one object other layers use (see docs/design/contracts.md and docs/store.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clawstore.store import actions, adopt, locks, reach, refs, reserve, trees
from clawstore.store.migrate import open_layout
from clawstore.store.objects import ObjectStore
from clawstore.store.trees import TreeEntry


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
    def get_action(self, key: str) -> dict[str, Any] | None:
        return actions.get_action(self, key)

    def get_action_record_id(self, key: str) -> str | None:
        return actions.get_action_record_id(self, key)

    def put_action(self, key: str, record: dict[str, Any]) -> str:
        return actions.put_action(self, key, record)

    def iter_actions(self) -> Iterator[tuple[str, str | None]]:
        return actions.iter_actions(self)

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
    def head_closure(self, head_id: str) -> reach.HeadClosure:
        """Everything a campaign head reaches, its actions too (StoreError if any of it is missing)."""
        return reach.head_closure(self, head_id)

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

    def list_leases(self) -> list[locks.LeaseInfo]:
        return locks.list_leases(self.root)

    def exclusive(self, name: str, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        return locks.exclusive(self.root, name, timeout)
