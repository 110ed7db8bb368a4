"""What the store plumbing commands share: their store, an object id from the command line, OSErrors as one line."""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from clawstore.cli.common import closed_with_command, workspace_store_dir
from clawstore.errors import StoreError, UsageError
from clawstore.store import Store, check_oid

_F = TypeVar("_F", bound=Callable[..., Any])


# The disk's errors, wherever they happen (a checkout's files, a put's store): exit 3, never bad usage
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}


def os_errors(command: _F) -> _F:
    """Any OSError left over becomes one line: a store or disk problem (3) or a bad path argument (2). A reader of
    stdout that left (`claw ls-tree ID | head -1`) is left to the group: exit 141, nothing said."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BrokenPipeError:
            raise  # (it said "claw: error: Broken pipe", exit 2, before session 72)
        except OSError as exc:
            name = str(exc.filename or "")
            store_dir = kwargs.get("store_dir")
            in_store = bool(name) and store_dir is not None and name.startswith(str(store_dir))
            disk = exc.errno in DISK_ERRNOS  # (a full disk said "No space left on device", exit 2, before session 72)
            error = StoreError if in_store or disk or "/objects/" in name else UsageError
            raise error(f"{name + ': ' if name else ''}{exc.strerror or exc}") from None

    return wrapper  # type: ignore[return-value]


def open_store_of(store_dir: Path | None, create: bool = False) -> Store:
    return closed_with_command(Store(workspace_store_dir(store_dir, must_exist=not create), create=create))


def existing_object(store: Store, oid: str) -> str:
    """A command-line id: malformed or absent is bad input (exit 2), not a broken store."""
    check_oid(oid)
    if not store.has(oid):
        raise UsageError(f"no such object: {oid} (store {store.root})")
    return oid
