"""Read a run's captured sandbox or workspace tree from the store, for checks and the judge."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, BinaryIO

from clawstore.store.trees import EMPTY_TREE_ID

if TYPE_CHECKING:
    from clawstore.store.store import Store


class _TreeIndex:
    def __init__(self, store: Store, tree_id: str):
        self.store = store
        # A run without tools keeps the empty tree: nothing to read (a read per checks and judge node).
        self.entries = {} if tree_id == EMPTY_TREE_ID else {entry.path: entry for entry in store.read_tree(tree_id)}
        self.dirs = {e.path for e in self.entries.values() if e.type == "dir"}
        for path in self.entries:  # every parent of an entry is a directory too
            parts = path.split("/")
            self.dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))

    def open(self, rel: str) -> BinaryIO | None:
        """A streaming reader of the file (verified when read to the end)."""
        entry = self.entries.get(rel)
        if entry is None or entry.type != "file" or entry.object is None:
            return None
        return self.store.open_object(entry.object)  # type: ignore[return-value]


def _rel(abs_path: str) -> str:
    return "/".join(part for part in abs_path.split("/") if part not in ("", "."))


class TreeSandboxFiles:
    """An llm_probe sandbox: the run's `/` is the tree's root, so `/tmp/x` is entry `tmp/x`."""

    def __init__(self, store: Store, tree_id: str):
        self._tree = _TreeIndex(store, tree_id)

    def open(self, abs_path: str) -> BinaryIO | None:
        return self._tree.open(_rel(abs_path))

    def exists(self, abs_path: str) -> bool:
        rel = _rel(abs_path)
        return rel in self._tree.entries or rel in self._tree.dirs

    def is_file(self, abs_path: str) -> bool:
        entry = self._tree.entries.get(_rel(abs_path))
        return entry is not None and entry.type == "file"

    def is_dir(self, abs_path: str) -> bool:
        return _rel(abs_path) in self._tree.dirs


class TreeWorkspaceFiles:
    """An openclaw workspace: paths relative to the workspace root."""

    def __init__(self, store: Store, tree_id: str):
        self._tree = _TreeIndex(store, tree_id)

    def paths(self) -> Iterable[str]:
        return sorted(p for p, e in self._tree.entries.items() if e.type == "file")

    def open(self, rel_path: str) -> BinaryIO | None:
        return self._tree.open(_rel(rel_path))
