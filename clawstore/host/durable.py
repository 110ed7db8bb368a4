"""Durability primitives: fsync helpers, temp-file naming, atomic small-file writes.

Temp files are named `<pid>-<process start ticks>-<random>.tmp` so fsck can tell a live writer's
temp file from one left behind by a killed process (pid reuse is caught by the start ticks).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO


@functools.cache
def _syncfs() -> Any:
    """libc's syncfs(2), or None (not Linux: sync(2) instead). Loaded at the first flush, not at import: a read
    command never flushes, and ctypes was ~5 ms of its start."""
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def naming(path: Path | str) -> Iterator[None]:
    """An OSError of a write that names no file (os.write's, a file object's: a full disk said `claw: error: No space
    left on device`, and which disk, the store's, the workspace's or the config's?) names `path`, as claw's one line
    names it (`claw: error: PATH: No space left on device`)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def fsync_path(path: Path | str) -> None:
    """fsync a file or directory by path (directories make renames and unlinks durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(path: Path | str) -> None:
    """Flush every dirty page and inode of the filesystem holding `path`: one flush for many files."""
    syncfs = _syncfs()
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)


def _start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (Linux), or None if unknown / not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces or ')': split after the last ')'.
    fields = stat[stat.rfind(b")") + 2:].split()
    if fields[:1] == [b"Z"]:  # a zombie has exited; only its parent has not reaped it yet
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


_SELF: tuple[int, int] | None = None


def process_identity() -> tuple[int, int]:
    """(pid, start ticks) of this process; recomputed after fork."""
    global _SELF
    pid = os.getpid()
    if _SELF is None or _SELF[0] != pid:
        _SELF = (pid, _start_ticks(pid) or 0)
    return _SELF


def process_alive(pid: int, start_ticks: int) -> bool:
    """Is the process that had this identity still running?"""
    if os.path.isdir("/proc/self"):
        ticks = _start_ticks(pid)
        return ticks is not None and (start_ticks == 0 or ticks == start_ticks)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_names = itertools.count()
_NAMES_FROM = int.from_bytes(os.urandom(8))  # (not `secrets`: it imports hmac and hashlib, ~4 ms of each start)


def temp_name(suffix: str = ".tmp") -> str:
    """`<pid>-<start ticks>-<16 hex digits>`: the process and a count, from a random start drawn once (a draw a name
    was a getrandom call a claim, and the interpreter lock handed to the build's other threads and back with it)."""
    pid, ticks = process_identity()
    return f"{pid}-{ticks}-{(_NAMES_FROM + next(_names)) & 0xFFFFFFFFFFFFFFFF:016x}{suffix}"


def temp_owner(name: str) -> tuple[int, int] | None:
    """Parse the writer identity out of a temp-file name (None if the name is not ours)."""
    parts = name.split("-", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def output_problem(flag: str, path: Path) -> str | None:
    """Why `path` cannot take a command's output file, or None. The file is written beside and renamed into place,
    and a rename replaces whatever the name held: a device (`-o /dev/full` run as root replaced it with a file), a
    named pipe or a symlink is refused rather than replaced without being written to."""
    parent = path.absolute().parent
    if not parent.is_dir():
        below = next((p for p in (parent, *parent.parents) if os.path.lexists(p)), None)
        if below is not None and not below.is_dir():  # (a file where a directory of the path should be)
            return f"{flag} {path}: {below} is a file, not a directory"
        return f"{flag} {path}: directory {parent} does not exist"
    if os.path.islink(path) or (os.path.lexists(path) and not path.is_file()):
        return f"{flag} {path}: not a regular file (a device, a pipe or a symlink would be replaced, not written to)"
    return None


def write_file_atomic(path: Path, data: bytes | Iterable[bytes], tmp_dir: Path, mode: int = 0o644,
                      durable: bool = True) -> None:
    """Write `data` (or its chunks, one after another) to `path` so that readers see the old content or the new one,
    never a mix: temp file in `tmp_dir` → fsync → rename → fsync of the directory. `durable=False` skips the fsyncs
    (derived data a crash may lose but never tear)."""
    tmp = tmp_dir / temp_name()
    try:  # (the open inside: a Ctrl-C raised as it returns left the temp file, the name being this process's own)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            with naming(path):  # (a full disk: the file it refused named, not only "No space left on device")
                for chunk in [data] if isinstance(data, bytes) else _coalesced(data):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view):]
                if durable:
                    os.fsync(fd)
        finally:
            os.close(fd)
        rename_into(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    if durable:
        fsync_path(path.parent)


# 64 KiB: ~780 action rows a write; what a run of them holds is small beside what a writer streams (a gc plan's
# writer measures its memory by the store's size: tests/gc/test_gc_plan_memory.py failed at 1 MiB a piece).
COALESCE_BYTES = 1 << 16


def _coalesced(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """`chunks` with runs of small ones joined, up to `COALESCE_BYTES` a piece: a system call a piece, not a chunk (an
    index segment's action rows are 84 bytes each; a write each, in the group commit's thread, was a hand-over of the
    interpreter lock each while the build's other threads ran: docs/scale/building.md, Session 63)."""
    run: list[bytes] = []
    size = 0
    for chunk in chunks:
        if len(chunk) >= COALESCE_BYTES:
            if run:
                yield b"".join(run)
                run, size = [], 0
            yield chunk
            continue
        run.append(chunk)
        size += len(chunk)
        if size >= COALESCE_BYTES:
            yield b"".join(run)
            run, size = [], 0
    if run:
        yield b"".join(run)


OUTSIDE_SUFFIX = ".outside"  # a symlink in a store's tmp/ to a temp file outside the store (atomic_file)


@contextlib.contextmanager
def atomic_file(path: Path, registry: Path | None = None) -> Iterator[BinaryIO]:
    """A file to stream into, which replaces `path` durably only if the block completes (write_file_atomic for data not
    in memory). `registry` (a store's tmp/): a symlink there lets the store's leftover cleanup remove the temp file once
    its writer is dead. Details: docs/store.md (Details by module)."""
    tmp = path.with_name(f".{path.name}.{temp_name()}")
    pointer = None
    if registry is not None:
        pointer = registry / temp_name(OUTSIDE_SUFFIX)
        os.symlink(os.path.abspath(tmp), pointer)
        fsync_path(registry)  # (the temp file is never durable before its pointer)
    try:
        try:
            with open(tmp, "xb") as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            rename_into(tmp, path)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        fsync_path(path.parent if str(path.parent) else Path("."))
    finally:
        if pointer is not None:
            _unlink_quietly(pointer)


def rename_into(tmp: Path | str, final: Path) -> None:
    """os.replace(tmp, final), recreating `final`'s directory if it was removed (a deleted shard
    folder must not make every later write to it fail)."""
    try:
        os.replace(tmp, final)
    except FileNotFoundError:
        if not os.path.exists(tmp):
            raise
        final.parent.mkdir(parents=True, exist_ok=True)
        fsync_path(final.parent.parent)
        os.replace(tmp, final)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
