"""Refs: named pointers (`campaigns/<id>`, `pins/<name>`) to objects, the roots of gc.

`refs/<name>` holds an object id. Updates are compare-and-set under one store-wide flock, and
written atomically, so readers (who take no lock) see the old value or the new one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import MissingObjectError, StoreError
from clawstore.host.durable import fsync_path, write_file_atomic
from clawstore.store.core import names
from clawstore.store.core.ids import check_oid, is_oid
from clawstore.store.core.layout import REFS, StoreLayout
from clawstore.store.core.locks import exclusive

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()  # `expected=ANY`: set unconditionally; `expected=None`: only if the ref does not exist
UNTRUSTED_REFS = "untrusted/"  # what is kept apart until its signer is trusted (Store.keep_apart, apart.py)


class RefConflict(StoreError):
    """A compare-and-set found another value than expected."""

    def __init__(self, name: str, expected: str | None, actual: str | None):
        self.name, self.expected, self.actual = name, expected, actual
        super().__init__(f"ref {name} changed concurrently: expected {expected}, found {actual}")


def check_ref_name(name: object) -> str:
    """The store's naming rule for refs (clawstore/store/core/names.py)."""
    return names.check_ref_name(name, "bad ref name")


def _path(store: ObjectStore, name: str) -> Path:
    return store.layout.refs / check_ref_name(name)


def get_ref(store: ObjectStore, name: str) -> str | None:
    return read_ref(store.root, name)


def read_ref(store_root: Path, name: str) -> str | None:
    """A ref's value from the store directory alone (no Store, no index): None when absent."""
    path = StoreLayout(store_root).refs / check_ref_name(name)
    try:
        text = path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError):
        text = ""
    if not is_oid(text):
        raise StoreError(f"ref file {path} is damaged")
    return text


def set_ref(store: ObjectStore, name: str, value: str, expected: str | None | _Any = ANY) -> None:
    """Point `name` at `value` (which must exist); with `expected`, only if the ref still has it."""
    path = _path(store, name)
    check_oid(value, f"target of ref {name}")
    store.flush_batch()  # the target may be pending in this thread's batch: publish it first
    if not store.has(value):
        raise MissingObjectError(f"cannot set ref {name}: object {value} is not in the store")
    with exclusive(store.root, "refs"):
        current = get_ref(store, name)
        if not isinstance(expected, _Any) and current != expected:
            raise RefConflict(name, expected, current)
        if current == value:
            return
        try:
            _make_parents(store.layout.refs, path.parent)
            write_file_atomic(path, (value + "\n").encode(), store.layout.tmp)
        except OSError as exc:  # disk full, read-only: a store error naming the ref, not a traceback
            raise StoreError(f"cannot write ref {name} in {store.root}: {exc.strerror or exc}") from None


def delete_ref(store: ObjectStore, name: str, expected: str | None | _Any = ANY) -> bool:
    """Remove a ref; returns whether it existed."""
    path = _path(store, name)
    with exclusive(store.root, "refs"):
        current = get_ref(store, name)
        if not isinstance(expected, _Any) and current != expected:
            raise RefConflict(name, expected, current)
        if current is None:
            return False
        os.unlink(path)
        fsync_path(path.parent)
        refs_dir = store.layout.refs
        parent = path.parent
        while parent != refs_dir:  # prune directories the ref leaves empty
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
        return True


def iter_ref_entries(store: ObjectStore, under: str = "") -> Iterator[tuple[str, str | None]]:
    """(name, target) for every ref file (below the directory `under`, a ref name's leading segments), sorted; target
    None if the file is damaged (for fsck)."""
    refs_dir = os.path.join(store.layout.root, REFS)  # (a string: asked before every paid node, pathlib's cost shows)
    top = refs_dir
    for segment in under.split("/") if under else ():
        top = os.path.join(top, segment)
        try:
            if not stat.S_ISDIR(os.lstat(top).st_mode):  # (a link is not followed, as in a whole listing)
                return
        except (OSError, ValueError):
            return
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        base = os.path.relpath(dirpath, refs_dir)
        for filename in sorted(filenames):
            name = filename if base == "." else f"{base}/{filename}"
            try:
                text = (Path(dirpath) / filename).read_text(encoding="ascii").strip()
            except FileNotFoundError:  # deleted while we walked
                continue
            except (OSError, UnicodeDecodeError):
                text = ""
            yield name, text if is_oid(text) else None


def list_refs(store: ObjectStore, prefix: str = "") -> dict[str, str]:
    """{name: target} for every ref whose name starts with `prefix`, sorted by name. Only the directory the prefix
    names is read (a build asks for `batches/` before each paid node it runs one by one: builder/claimed.py)."""
    under = prefix.rpartition("/")[0]
    if any(segment in ("", ".", "..") for segment in under.split("/")):
        under = ""  # (no ref is named so: filtered from the whole listing, as before)
    found = {name: target for name, target in iter_ref_entries(store, under)
             if target is not None and name.startswith(prefix)}
    return dict(sorted(found.items()))


def _make_parents(top: Path, directory: Path) -> None:
    """mkdir -p below `top`, syncing each new directory's parent so the ref stays reachable."""
    missing = []
    while directory != top and not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for new in reversed(missing):
        try:
            new.mkdir()
        except FileExistsError:
            if not new.is_dir():
                raise StoreError(f"cannot create ref directory {new}: a ref of that name exists") from None
        fsync_path(new.parent)
