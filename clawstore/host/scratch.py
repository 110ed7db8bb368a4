"""Scratch directories that runs fill, removed whatever they hold, even nested thousands deep (where `shutil.rmtree`
raises RecursionError and would fail a paid run). Details: docs/runners.md (Details by module)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clawstore.host.durable import temp_name


def remove_tree(path: Path | str) -> None:
    """Remove `path` and everything under it, as far as possible; never raises."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)


# The scratch a run fills is removed when the run ends; one a SIGKILL ended is removed by the next build or gc
# (sweep_dead_scratch). Its owner holds an flock on OWNER_FILE in it from before that file has its name until the
# directory is gone: a directory whose OWNER_FILE nobody holds is a dead process's. Details: docs/runners.md.
OWNER_FILE = ".claw-owner"
SWEPT_PREFIXES = ("claw-run-", "claw-transcript-", "claw-agent-ws-", "claw-configs-", "claw-ray-openclaw-",
                  "claw-query-")
# One without an OWNER_FILE was made by a claw before session 62 (or is being made this instant): its owner cannot be
# asked, so it is removed only when older than any run (claw-oc-cid-: the engine's id files before session 62).
UNOWNED_AGE_S = 24 * 3600
_UNOWNED_PREFIXES = (*SWEPT_PREFIXES, "claw-oc-cid-")
# Only a name tempfile.mkdtemp gives (a prefix and 8 of its letters): TMPDIR may be $HOME, `claw-run-notes` the user's.
_MADE_NAME = re.compile("(?:" + "|".join(map(re.escape, _UNOWNED_PREFIXES)) + ")[a-z0-9_]{8}")
TOMB_PREFIX = ".claw-swept-"  # a directory a sweep is removing (its claim's lock held while it does)
_TOMB_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
_TOMB_NAME = re.compile(re.escape(TOMB_PREFIX) + _MADE_NAME.pattern + "-[a-z0-9_]{8}")
# What a claw before session 62 left in one (a sandbox, an OpenClaw root and its engine's id files, an agent
# database's private copy, a snapshot's workspace; a killed sweep's claim): a directory holding anything else is
# not claw's.
_UNOWNED_ENTRY = re.compile(r"sandbox|workspace|cid|claw-oc-.*|openclaw-agent\.sqlite.*|\.claw-owner\.[0-9]+",
                            re.DOTALL)


class OwnedScratch:
    """A directory made in the system's temp directory (or `parent`), held by this process until `remove()`."""

    def __init__(self, prefix: str, parent: Path | str | None = None):
        self.path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        try:
            self._fd: int | None = _hold(Path(self.path))
        except BaseException:
            remove_tree(self.path)
            raise

    def remove(self) -> None:
        """Remove the directory, then let it go (so no sweep takes it for a dead process's while it goes)."""
        if self._fd is not None:
            remove_tree(self.path)
            os.close(self._fd)
            self._fd = None


def _hold(directory: Path, claim: bool = False) -> int:
    """The locked OWNER_FILE's descriptor. Locked under another name and then renamed: a sweep never sees the file
    unlocked while its owner lives. A sweep's `claim` links it instead (FileExistsError if another's is there)."""
    staged = directory / f"{OWNER_FILE}.{os.getpid()}"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())  # (whose lock a sweep may ask: _lock_says)
        if claim:
            try:
                os.link(staged, directory / OWNER_FILE)
            finally:
                os.unlink(staged)
        else:
            os.rename(staged, directory / OWNER_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def scratch_dir(prefix: str, parent: Path | str | None = None) -> Iterator[str]:
    """`tempfile.TemporaryDirectory`, removed with `remove_tree`, and an OwnedScratch (a SIGKILL's is swept)."""
    scratch = OwnedScratch(prefix, parent)
    try:
        yield scratch.path
    finally:
        scratch.remove()


def sweep_dead_scratch(parent: Path | str | None = None) -> tuple[int, int]:
    """Remove this user's scratch directories in the system's temp directory (or `parent`) whose owner is gone: (how
    many, their bytes). Never raises; a live owner's (a concurrent build's) is never touched."""
    root = Path(parent if parent is not None else tempfile.gettempdir())
    removed = size = 0
    try:
        with os.scandir(root) as entries:
            found = [Path(e.path) for e in entries if _MADE_NAME.fullmatch(e.name) or _TOMB_NAME.fullmatch(e.name)]
    except OSError:
        return 0, 0
    for path in found:
        claim = _claim_dead(path, unowned=not path.name.startswith(TOMB_PREFIX))
        if claim is None:
            continue
        try:
            # Moved aside first: of two sweeps that both locked it (one after the other removed it and let go) only
            # the one whose move succeeds counts it. Its claim moves with it: a sweep killed while removing leaves a
            # directory a later sweep takes only by that claim's free lock (never as an unowned one: a live sweep
            # may have removed its owner file already).
            tomb = path.with_name(f"{TOMB_PREFIX}{path.name}-{''.join(random.choices(_TOMB_LETTERS, k=8))}")
            try:
                if tomb.exists():
                    continue
                os.rename(path, tomb)
            except OSError:
                continue
            size += _tree_bytes(tomb)
            remove_tree(tomb)
            removed += 1
        finally:
            os.close(claim)
    return removed, size


def _claim_dead(path: Path, unowned: bool = True) -> int | None:
    """If `path`'s owner is gone, its OWNER_FILE locked by this sweep (held while it removes the directory: a sweep
    beside it, a gc's beside a build's, leaves it alone, and neither counts it twice); else None."""
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():  # (a link, or another user's: not ours)
        return None
    try:  # (O_NONBLOCK: a FIFO planted there is not waited on)
        fd = os.open(path / OWNER_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return _claim_unowned(path) if unowned else None
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode) and _lock_says(os.read(fd, 512)):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
    except OSError:  # (held: its owner lives, or a sweep beside this one removes it)
        pass
    os.close(fd)
    return None


def _claim_unowned(path: Path) -> int | None:
    """A directory without OWNER_FILE older than any run and holding only what claw left, claimed with an OWNER_FILE
    of this sweep's (linked, not renamed: of two sweeps one gets it)."""
    try:  # (its age read now: a sweep removing it beside this one has just changed it)
        old = time.time() - path.lstat().st_mtime > UNOWNED_AGE_S
    except OSError:
        return None
    if not old or not _left_by_claw(path):
        return None
    try:
        return _hold(path, claim=True)
    except OSError:
        return None


def _lock_says(owner: bytes) -> bool:
    """Whether an unlocked OWNER_FILE saying `owner` ("PID HOST") means its owner is gone. Not if it is this process
    (where flock is fcntl underneath, on NFS, this process's probe succeeds on its own file and the close drops its
    lock), nor another host's (a TMPDIR shared over NFS: a lock local to each host says nothing of the other's)."""
    pid, _, host = owner.decode(errors="replace").strip().partition(" ")
    return pid != str(os.getpid()) and host in ("", socket.gethostname())


def _left_by_claw(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return all(_UNOWNED_ENTRY.fullmatch(entry.name) for entry in entries)
    except OSError:
        return False


def _tree_bytes(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


@contextmanager
def writer_scratch_dir(tmp_dir: Path, purpose: str) -> Iterator[Path]:
    """A scratch directory in a store's `tmp_dir`, named by this process (durable.temp_name) and removed at
    the end; one a SIGKILL left behind is a dead writer's leftover (store/core/leftovers.py)."""
    path = Path(tmp_dir) / temp_name(f".{purpose}")
    path.mkdir(mode=0o700)
    try:
        yield path
    finally:
        remove_tree(path)
