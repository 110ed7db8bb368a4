"""An absent store read as empty: what `status`, `plan`, `explain` and `build --dry-run` answer before the first build
(or for a mistyped --store / $CLAW_STORE) without making anything at that path, not even a lock file."""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.layout import read_format


def absent(path: Path) -> bool:
    """No store there and nothing a store would be made in place of: missing, or an empty directory."""
    if read_format(path) is not None or os.path.lexists(path) and not path.is_dir():
        return False
    try:
        return not path.exists() or not any(path.iterdir())
    except OSError:
        return False  # (unreadable: opening it says why)


class EmptyStore(Store):
    """A new store in a temporary directory, standing in for the absent `shown` (which messages name); the
    directory is removed on close."""

    def __init__(self, shown: Path):
        self.shown = shown
        self._scratch = tempfile.mkdtemp(prefix="claw-absent-store-")
        try:
            super().__init__(Path(self._scratch) / "store")
        except BaseException:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self._remove = weakref.finalize(self, shutil.rmtree, self._scratch, ignore_errors=True)

    def close(self) -> None:
        super().close()
        self._remove()


def shown_root(store: Store) -> Path:
    """The store's path as the user named it."""
    return store.shown if isinstance(store, EmptyStore) else store.root
