"""The store's directory layout, created once and marked by a format file; upgrades format 1."""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from pathlib import Path

from clawstore.errors import StoreError
from clawstore.host.durable import fsync_path, write_file_atomic

FORMAT_FILE = "CLAWSTORE"
FORMAT_VERSION = 2
# The store's directories (docs/store.md): spelled here only, reached through StoreLayout or these names.
PACKS, INDEX, TMP, REFS, LEASES, LOCKS, QUARANTINE, BUILDS, MANIFEST = DIRS = (
    "packs", "index", "tmp", "refs", "leases", "locks", "quarantine", "builds", "manifest")
REMOTES = "remotes"  # the remotes' caches (remote/sync.py): made when a remote is first used
INCOMING = "incoming"  # in a remote's cache: the packs pulls keep (remote/downloads.py)
CLAIMS = "claims"  # who is executing which action now (claims.py): made when a build first claims one
FORMAT1_DIRS = OBJECTS1, ACTIONS1 = ("objects", "ac")  # loose objects and action-cache files of format 1
STALE_STAGING_S = 600
MARKER_MAX = 4096  # a marker is 14 bytes; what is longer is damaged, not read whole


class StoreLayout:
    """Where each part of the store at `root` lives."""

    __slots__ = ("root",)

    def __init__(self, root: Path | str):
        self.root = Path(root)

    @property
    def packs(self) -> Path:
        return self.root / PACKS

    @property
    def index(self) -> Path:
        return self.root / INDEX

    @property
    def tmp(self) -> Path:
        return self.root / TMP

    @property
    def refs(self) -> Path:
        return self.root / REFS

    @property
    def leases(self) -> Path:
        return self.root / LEASES

    @property
    def locks(self) -> Path:
        return self.root / LOCKS

    @property
    def quarantine(self) -> Path:
        return self.root / QUARANTINE

    @property
    def builds(self) -> Path:
        return self.root / BUILDS

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def claims(self) -> Path:
        return self.root / CLAIMS

    @property
    def remotes(self) -> Path:
        return self.root / REMOTES

    def incoming(self, remote: str) -> Path:
        return self.root / REMOTES / remote / INCOMING


class DamagedMarkerError(StoreError):
    """The marker file is there but does not say a format (garbage, emptied, torn by a failing disk)."""


def read_format(root: Path) -> int | None:
    """The format number in the marker file, None if there is no store at `root`."""
    marker = root / FORMAT_FILE
    try:
        with open(marker, "rb") as fh:
            data = fh.read(MARKER_MAX)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {marker}: {exc.strerror}") from None
    try:
        version = json.loads(data)["format"]
    except (ValueError, KeyError, TypeError, RecursionError):  # (a UnicodeDecodeError is a ValueError)
        version = None
    if not isinstance(version, int) or isinstance(version, bool):
        raise DamagedMarkerError(f"{marker}: damaged (not a clawstore format file); `claw fsck --repair` can "
                                 "rewrite it from the store's layout") from None
    if version not in (1, FORMAT_VERSION):
        raise StoreError(f"{marker}: unsupported store format {version!r} (this claw reads 1 and {FORMAT_VERSION})")
    return version


def format_from_layout(root: Path) -> tuple[int | None, str]:
    """The format the store's directories say, and why (None, and why not, when they do not say one):
    what `claw fsck --repair` writes into a damaged marker."""
    format2 = [f"{name}/" for name in (PACKS, INDEX) if (root / name).is_dir()]
    format1 = [f"{name}/" for name in FORMAT1_DIRS if (root / name).exists()]
    if len(format2) == 2 and not format1:
        return FORMAT_VERSION, "packs/ and index/ are present, no format-1 objects/ or ac/"
    if format1 and not format2:
        return 1, f"{' and '.join(format1)} (format 1) present, no packs/ or index/"
    if format1:
        return None, (f"both format-1 ({', '.join(format1)}) and format-2 ({', '.join(format2)}) directories are "
                      "present: a migration from format 1 was interrupted, before or after its marker said 2 "
                      '(writing {"format": 1} into it makes the next command finish the migration)')
    return None, "neither format's directories are present (packs/ and index/, or objects/ and ac/)"


def check_marker(root: Path, repair: bool) -> tuple[str | None, str | None]:
    """fsck's look at the marker, the one file without which no command opens the store: (the problem,
    or None; what repair did, or None). Repair rewrites a damaged marker with the format the layout
    says, never guessing when it does not say one."""
    try:
        read_format(root)
        return None, None
    except DamagedMarkerError:
        pass
    version, why = format_from_layout(root)
    if version is None:
        return f"{FORMAT_FILE}: damaged (not a clawstore format file), and --repair cannot rewrite it: {why}", None
    problem = f"{FORMAT_FILE}: damaged (not a clawstore format file); the layout says format {version}: {why}"
    if not repair:
        return f"{problem} (claw fsck --repair rewrites it)", None
    (root / TMP).mkdir(exist_ok=True)  # (where write_marker stages it)
    write_marker(root, version)
    return problem, f"rewrote {FORMAT_FILE} as format {version}"


def ensure_dirs(root: Path) -> None:
    for name in DIRS:
        (root / name).mkdir(exist_ok=True)


def write_marker(root: Path, version: int) -> None:
    body = json.dumps({"format": version}).encode() + b"\n"
    write_file_atomic(root / FORMAT_FILE, body, root / TMP)
    fsync_path(root)


def remove_format1_leftovers(root: Path) -> None:
    for name in FORMAT1_DIRS:
        shutil.rmtree(root / name, ignore_errors=True)
    fsync_path(root)


def create_layout(root: Path) -> None:
    """Make the layout in a hidden sibling and rename it into place: a store appears whole or not at all
    (a creator killed half-way used to leave a directory without its marker, which no claw would open)."""
    if root.exists() and not root.is_dir():
        raise StoreError(f"store path {root} exists and is not a directory")
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        if root.is_dir() and any(root.iterdir()):
            _create_in_place(root)  # a non-empty directory (not ours to replace): marker last
            return
        _remove_stale_staging(root)
        staging = root.parent / f".{root.name}.new-{os.urandom(8).hex()}"
        staging.mkdir()
        try:
            _create_in_place(staging)
            try:
                os.rename(staging, root)  # replaces an empty directory; fails on a non-empty one
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or read_format(root) is None:
                    raise
                return  # a concurrent creator won the race with a whole store
            fsync_path(root.parent)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:
        raise StoreError(f"cannot create store at {root}: {exc.strerror}") from None


def _create_in_place(root: Path) -> None:
    root.mkdir(exist_ok=True)
    ensure_dirs(root)
    fsync_path(root)  # the new directories' entries
    # The marker comes last: a store whose marker exists has its whole layout.
    write_marker(root, FORMAT_VERSION)


def _remove_stale_staging(root: Path) -> None:
    """Staging directories of creators killed long ago (creation takes milliseconds)."""
    cutoff = time.time() - STALE_STAGING_S
    for leftover in root.parent.glob(f".{root.name}.new-*"):
        try:
            if leftover.lstat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass
