"""Trees: a directory snapshot as one canonical JSON object.

`{"entries": [...], "tree_version": 1}` with one entry per file, directory and symlink, sorted by
path. Modes are normalised the way git does it (0o100644 / 0o100755 files, 0o040000 directories,
0o120000 symlinks) so the same workspace has the same tree id on every machine whatever the umask.
Symlinks are recorded as links (their target text), never followed. Every directory has an entry, so
empty directories round-trip.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError, UsageError, quoted
from clawstore.store.core import codec
from clawstore.store.core.ids import is_oid, oid_of
from clawstore.store.core.names import relative_path_problem
from clawstore.values import jsontext
from clawstore.values.canonical import canonical_json

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore

TREE_VERSION = 1
MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_DIR = 0o040000
MODE_LINK = 0o120000
_MODES = {"file": (MODE_FILE, MODE_EXEC), "dir": (MODE_DIR,), "symlink": (MODE_LINK,)}
_TREE_PREFIX = b'{"entries":['  # how every canonical tree object starts (sorted keys)


class NotATreeError(UsageError):
    """An object id given where a tree was expected names something else."""


class UnsafeTreeError(StoreError):
    """A tree entry would land outside the checkout directory."""


@dataclass(frozen=True)
class TreeEntry:
    path: str  # relative, '/'-separated
    type: str  # "file" | "dir" | "symlink"
    mode: int
    size: int
    object: str | None = None  # files: the content's object id
    target: str | None = None  # symlinks: the link text

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"path": self.path, "type": self.type, "mode": self.mode, "size": self.size}
        if self.object is not None:
            doc["object"] = self.object
        if self.target is not None:
            doc["target"] = self.target
        return doc


# --- snapshot -----------------------------------------------------------------------------------
def empty_tree(store: ObjectStore) -> str:
    """The tree of an empty directory (what put_tree gives for one), without a directory."""
    return store.put_bytes(_EMPTY_TREE)


_EMPTY_TREE = canonical_json({"tree_version": TREE_VERSION, "entries": []})  # (one per run without tools)
EMPTY_TREE_ID = oid_of(_EMPTY_TREE)  # a reader of it knows its entries (none) without reading it


def put_tree(store: ObjectStore, directory: Path | str, escape_names: bool = False) -> str:
    """Snapshot `directory`. A name (or link target) that is not UTF-8 is refused, or, with
    `escape_names` (what a run wrote: a model's or an agent's files, already paid for), kept with each
    undecodable byte written as `\\xNN` (`caf\\xe9.txt`)."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"cannot snapshot {root}: not a directory")
    entries: list[TreeEntry] = []
    with store.batch():  # a tree of many files costs a few flushes, not two per file
        _walk(store, root, entries, escape_names)
        entries.sort(key=lambda e: e.path)
        return store.put_json({"tree_version": TREE_VERSION, "entries": [e.to_json() for e in entries]})


def _walk(store: ObjectStore, root: Path, out: list[TreeEntry], escape_names: bool) -> None:
    """Every entry under `root`, without recursion: a tree may nest deeper than Python recurses."""
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            with os.scandir(directory) as iterator:
                children = sorted(iterator, key=lambda e: e.name)
        except OSError as exc:
            raise StoreError(f"cannot snapshot {directory}: {exc.strerror}") from None
        names = {child.name for child in children} if escape_names else None
        for child in children:
            rel = prefix + _utf8_name(directory, child.name, names)
            try:
                info = child.stat(follow_symlinks=False)
            except FileNotFoundError:  # vanished while we walked (a live sandbox)
                continue
            if stat.S_ISLNK(info.st_mode):
                target = _utf8_name(directory, os.readlink(child.path), set() if escape_names else None)
                out.append(TreeEntry(rel, "symlink", MODE_LINK, len(target.encode()), target=target))
            elif stat.S_ISDIR(info.st_mode):
                out.append(TreeEntry(rel, "dir", MODE_DIR, 0))
                pending.append((Path(child.path), rel + "/"))
            elif stat.S_ISREG(info.st_mode):
                oid, logical = store.put_file_sized(child.path)  # unreadable: UsageError naming it
                mode = MODE_EXEC if info.st_mode & stat.S_IXUSR else MODE_FILE
                out.append(TreeEntry(rel, "file", mode, logical, object=oid))
            # sockets, fifos and devices have no content to keep: skipped


def _utf8_name(directory: Path, name: str, escape_beside: set[str] | None = None) -> str:
    """`name` (as os.scandir gives it: undecodable bytes as lone surrogates). Not UTF-8: refused, or
    escaped when `escape_beside` (the names of its directory, and those escaped there so far) is given
    and the escaped name is not one of them."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    escaped = os.fsencode(name).decode("utf-8", "backslashreplace")
    if escape_beside is None or escaped in escape_beside:
        raise UsageError(f"cannot snapshot {directory}: name {name!r} is not valid UTF-8")
    escape_beside.add(escaped)  # (two names that escape alike would be one path too)
    return escaped


# --- reading ------------------------------------------------------------------------------------
def read_tree(store: ObjectStore, oid: str) -> list[TreeEntry]:
    with store.open_object(oid) as reader:
        head = reader.read(len(_TREE_PREFIX))
    if head != _TREE_PREFIX:
        raise NotATreeError(f"object {oid} is not a tree")
    return parse_tree(oid, store.get_bytes(oid))


def parse_tree(oid: str, data: bytes) -> list[TreeEntry]:
    """The entries of tree `oid` from its content (NotATreeError naming what is wrong)."""
    if not data.startswith(_TREE_PREFIX):
        raise NotATreeError(f"object {oid} is not a tree")
    try:
        doc = jsontext.loads(data)
    except ValueError:
        raise NotATreeError(f"object {oid} is not a tree") from None
    if not isinstance(doc, dict) or doc.get("tree_version") != TREE_VERSION or not isinstance(
        doc.get("entries"), list
    ):
        raise NotATreeError(f"object {oid} is not a tree (version {doc.get('tree_version')!r})")
    return [_parse_entry(oid, i, raw) for i, raw in enumerate(doc["entries"])]


def _parse_entry(oid: str, index: int, raw: Any) -> TreeEntry:
    where = f"tree {oid} entry {index}"
    if not isinstance(raw, dict):
        raise NotATreeError(f"{where}: not an object")
    path, kind, mode, size = raw.get("path"), raw.get("type"), raw.get("mode"), raw.get("size")
    if not isinstance(path, str) or kind not in _MODES or mode not in _MODES[kind]:
        raise NotATreeError(f"{where}: bad path/type/mode")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise NotATreeError(f"{where} ({path}): bad size")
    obj, target = raw.get("object"), raw.get("target")
    if kind == "file" and not is_oid(obj):
        raise NotATreeError(f"{where} ({path}): bad object id")
    if kind == "symlink" and not isinstance(target, str):
        raise NotATreeError(f"{where} ({path}): bad symlink target")
    return TreeEntry(path, kind, mode, size, obj if kind == "file" else None,
                     target if kind == "symlink" else None)


def tree_objects(store: ObjectStore, oid: str) -> list[str]:
    """Ids of the file objects a tree names (for fsck and gc)."""
    return [e.object for e in read_tree(store, oid) if e.object is not None]


# --- checkout -----------------------------------------------------------------------------------
def checkout(store: ObjectStore, oid: str, dest: Path | str, allow_external_links: bool = False) -> None:
    """Materialise a tree into `dest` (created if missing; must be empty).

    Every entry is validated before anything is written: no absolute paths, no `..`, nothing under a
    file or a symlink, and (unless allowed) no symlink pointing outside `dest`.
    """
    entries = read_tree(store, oid)
    check_entries(oid, entries, allow_external_links)
    for entry in entries:
        if entry.object is not None and not store.has(entry.object):
            raise StoreError(f"tree {oid}: entry {entry.path} names missing object {entry.object}")
    target_dir = Path(dest)
    made: Path | None = None  # the outermost directory the checkout made (None: `dest` was there, empty)
    if target_dir.exists():
        if not target_dir.is_dir() or any(target_dir.iterdir()):
            raise UsageError(f"cannot check out into {target_dir}: not an empty directory")
    else:
        made = target_dir.absolute()
        while not made.parent.exists():
            made = made.parent
        target_dir.mkdir(parents=True)
    try:
        for entry in entries:
            place = target_dir / entry.path
            if entry.type == "dir":
                place.mkdir(parents=True, exist_ok=True)
            elif entry.type == "symlink":
                place.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(entry.target, place)  # type: ignore[arg-type]
            else:
                place.parent.mkdir(parents=True, exist_ok=True)
                _write_file(store, oid, entry, place)
    except BaseException:  # a full disk, a damaged object, Ctrl-C: no half checkout (the retry needs DIR empty)
        _undo_checkout(target_dir, made)
        raise


def _undo_checkout(target_dir: Path, made: Path | None) -> None:
    """Remove what a failed checkout wrote: the directories it made, or else what it put into the empty `target_dir`
    (links removed as links, never followed)."""
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        return
    with contextlib.suppress(OSError):
        for child in target_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    child.unlink()


def _write_file(store: ObjectStore, tree: str, entry: TreeEntry, place: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(place, flags, 0o600)
    written = 0
    with os.fdopen(fd, "wb") as out, store.open_object(entry.object) as reader:  # type: ignore[arg-type]
        while chunk := reader.read(codec.CHUNK):
            written += len(chunk)
            if written > entry.size:  # (never more than the entry says: an object's content can be a bomb's)
                break
            out.write(chunk)
        os.fchmod(out.fileno(), entry.mode & 0o777)
    if written != entry.size:
        more = "more" if written > entry.size else str(written)
        raise StoreError(f"tree {tree}: entry {entry.path} has size {entry.size} but its object has {more}")


def check_entries(oid: str, entries: list[TreeEntry], allow_external_links: bool = False) -> None:
    """Refuse a tree that could not be checked out safely: an entry path breaking the naming rule
    (clawstore/store/core/names.py), a duplicate, an entry under a file or symlink, or (unless allowed) a
    symlink pointing outside the checkout."""
    kinds: dict[str, str] = {}
    for entry in entries:
        path = entry.path
        problem = relative_path_problem(path)
        if problem is not None:
            raise UnsafeTreeError(f"tree {oid}: refusing entry {quoted(path)}: the path {problem}")
        if path in kinds:
            raise UnsafeTreeError(f"tree {oid}: refusing entry {path!r}: duplicate path")
        kinds[path] = entry.type
    for entry in entries:  # second pass: parents judged on the whole tree, whatever the entry order
        parts = entry.path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if kinds.get(parent, "dir") != "dir":
                raise UnsafeTreeError(
                    f"tree {oid}: refusing entry {entry.path!r}: its parent is a {kinds[parent]}"
                )
        if entry.type == "symlink" and ("\x00" in (entry.target or "") or len(entry.target or "") > 4096):
            raise UnsafeTreeError(f"tree {oid}: refusing symlink {quoted(entry.path)}: bad target")
        if entry.type == "symlink" and not allow_external_links:
            target = entry.target or ""
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), target))
            if not target or target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                raise UnsafeTreeError(
                    f"tree {oid}: refusing symlink {entry.path!r} -> {target!r}: it points outside the checkout"
                )

