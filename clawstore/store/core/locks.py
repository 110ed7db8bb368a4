"""Process coordination: exclusive named locks and leases, both kernel flocks, so that a killed process never leaves a
lock held. docs/store.md (Leases and locks; Details by module)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from clawstore.errors import StoreError, UsageError
from clawstore.host.durable import naming, process_identity, temp_name
from clawstore.store.core.layout import LEASES, LOCKS, TMP

_POLL_S = 0.02
# gc holds this lock exclusively while it deletes; a new lease waits for it (see lease() and gc.py).
SWEEP_LOCK = "gc-sweep"
# A lease whose purpose is one of these + a head id keeps that head (gc.py): an archive export reading it, a build
# reading its campaign's previous head a window at a time (builder/api.py) while another build may move the ref away
# from it. (Here, not in gc.py: a build takes the lease and never imports gc.)
EXPORT_LEASE_PREFIX = "archive-export "
READING_HEAD_LEASE_PREFIX = "reading head "


def _check_lock_name(name: str) -> str:
    if not name or not all(c.isalnum() or c in "._-" for c in name) or name.startswith("."):
        raise UsageError(f"bad lock name {name!r}")
    return name


@contextlib.contextmanager
def exclusive(root: Path, name: str, timeout: float | None = None) -> Iterator[None]:
    """Hold `locks/<name>.lock` exclusively. timeout None waits forever; else StoreError when it expires."""
    path = root / LOCKS / f"{_check_lock_name(name)}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot open lock {path}: {exc.strerror}") from None
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StoreError(
                            f"store {root} is busy: lock '{name}' is held by another process"
                        ) from None
                    time.sleep(_POLL_S)
        yield
    finally:
        # Unlocked before closed: a child forked meanwhile (a process being started, not yet exec'd) shares
        # the open file, and closing only our descriptor would leave the lock held until the child's goes.
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def held_now(root: Path, name: str) -> bool:
    """Whether another process holds `locks/<name>.lock` at this moment (a look: a shared flock tried and let go at
    once, so a holder that wants it exclusively in that instant is refused as if busy)."""
    try:
        fd = os.open(root / LOCKS / f"{_check_lock_name(name)}.lock", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@dataclass(frozen=True)
class LeaseInfo:
    path: Path
    pid: int
    purpose: str
    started_at: str  # ISO 8601 UTC
    started_epoch: float
    host: str
    alive: bool


@contextlib.contextmanager
def lease(root: Path, purpose: str) -> Iterator[LeaseInfo]:
    """Mark this process as using the store (gc keeps what it may need) until the block ends."""
    pid, _ = process_identity()
    now = time.time()
    doc = {
        "pid": pid,
        "purpose": purpose,
        "started_at": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "started_epoch": now,
        "host": socket.gethostname(),
    }
    name = temp_name(".json")
    staging, final = root / TMP / name, root / LEASES / name
    # Lock before the file is visible under leases/: nobody can ever see it unlocked and call it stale.
    try:
        fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
        # A store on a read-only filesystem (a shared results store mounted read-only): no gc can delete anything
        # under a reader, so it needs no lease (`archive export`, `push` and a build's plan refused it, session 72).
        yield LeaseInfo(final, pid, purpose, doc["started_at"], now, doc["host"], True)  # type: ignore[arg-type]
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with naming(staging):  # (a full disk: `claw build` said only "No space left on device" before session 73)
            os.write(fd, json.dumps(doc, sort_keys=True).encode() + b"\n")
        os.rename(staging, final)
        # The lease is visible now; wait for a gc sweep in progress to end. A sweep that starts later
        # sees this lease and keeps what its holder may use; one already running did not see it, so
        # the holder must not read the store (e.g. plan from the action cache) before that sweep ends.
        _wait_for_sweep(root)
        info = LeaseInfo(final, pid, purpose, doc["started_at"], now, doc["host"], True)  # type: ignore[arg-type]
        yield info
    finally:
        for path in (staging, final):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        os.close(fd)


def _wait_for_sweep(root: Path) -> None:
    fd = os.open(root / LOCKS / f"{SWEEP_LOCK}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def list_leases(root: Path) -> list[LeaseInfo]:
    """Every lease file, oldest first, each marked alive (holder running) or not."""
    found = []
    for path in sorted((root / LEASES).glob("*.json")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # released while we listed
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                alive = False
            except BlockingIOError:
                alive = True
            raw = os.read(fd, 65536)
        finally:
            os.close(fd)
        try:
            doc = json.loads(raw)
            info = LeaseInfo(path, int(doc["pid"]), str(doc["purpose"]), str(doc["started_at"]),
                             float(doc["started_epoch"]), str(doc.get("host", "")), alive)
        except (ValueError, KeyError, TypeError):  # a holder killed mid-write: nothing to honour
            info = LeaseInfo(path, 0, "", "", 0.0, "", alive)
        found.append(info)
    return sorted(found, key=lambda lease_info: lease_info.started_epoch)


def remove_stale_leases(root: Path) -> int:
    """Delete lease files whose holder is gone (re-checked under the lock itself)."""
    removed = 0
    for info in list_leases(root):
        if info.alive:
            continue
        try:
            fd = os.open(info.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(info.path)
            removed += 1
        except (BlockingIOError, FileNotFoundError):
            pass
        finally:
            os.close(fd)
    return removed
