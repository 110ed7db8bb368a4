"""Packs a pull downloaded whole, kept until it adopts them, so that a pull killed mid-transfer and run again does not
download them again. Details: docs/remote.md (Details by module)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from clawstore.store.core.ids import file_digest


class Downloads:
    """The packs kept for one remote, in `directory` (StoreLayout.incoming)."""

    def __init__(self, directory: Path):
        self.dir = directory

    def _path(self, pack: str) -> Path:
        return self.dir / f"{pack}.pack"

    def has(self, pack: str, size: int) -> bool:
        """Is a file of this size kept for `pack` (its bytes not checked yet)?"""
        try:
            info = os.lstat(self._path(pack))
        except FileNotFoundError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size == size

    def take(self, pack: str, size: int, path: Path) -> bool:
        """Link the kept download of `pack` at `path` if its bytes hash to the pack's name (the linked file
        is what is hashed: what the pull reads next). A kept file that does not is removed."""
        if not self.has(pack, size):
            return False
        try:
            os.link(self._path(pack), path, follow_symlinks=False)
        except OSError:  # (gone meanwhile: another pull of this remote adopted it)
            return False
        if stat.S_ISREG(os.lstat(path).st_mode) and file_digest(path) == pack:
            # Dated now: a pack moved in whole keeps its file's mtime, which gc takes as its objects' age, and one an
            # interrupted pull downloaded an hour ago lay outside this pull's lease window (before session 77 a gc
            # before the ref moved deleted it, head and all: tests/gc/test_writers_beside_gc.py).
            with contextlib.suppress(OSError):  # (not ours to date: kept as it was, as before)
                os.utime(path)
            return True
        path.unlink()
        self.forget([pack])
        return False

    def keep(self, pack: str, path: Path) -> None:
        """Keep the pack just downloaded at `path` (best effort: a pull that cannot downloads again)."""
        with contextlib.suppress(OSError):
            self.dir.mkdir(exist_ok=True)
            os.link(path, self._path(pack))

    def forget(self, packs: Iterable[str]) -> None:
        for pack in packs:
            self._path(pack).unlink(missing_ok=True)

    def clear(self) -> None:
        """Forget every kept pack (a full pull succeeded: none is wanted any more)."""
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.dir):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
