"""The descriptors a test leaves open: what tests/conftest.py's guard compares before and after each test."""

import collections
import gc
import os
import sysconfig
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_FDS = "/proc/self/fd"
# A library's own files are not a test's: matplotlib's font cache keeps the fonts it loaded open for the process.
_LIBRARIES = tuple(sorted({os.path.join(sysconfig.get_paths()[name], "") for name in ("stdlib", "purelib", "platlib")}))


def open_descriptors() -> dict[int, str]:
    """This process's open descriptors and what each is (a path, socket:[inode], pipe:[inode], anon_inode:...)."""
    found: dict[int, str] = {}
    for name in os.listdir(_FDS):
        try:
            found[int(name)] = os.readlink(f"{_FDS}/{name}")
        except OSError:  # (the listing's own descriptor, closed by now)
            pass
    return found


def opened_by(call: Callable[[], T]) -> tuple[T, dict[int, str]]:
    """What `call` returns, and the descriptors open after it that were not before: with the collector off while it
    runs, so what it left for a garbage collection to close is counted (an in-process command's files)."""
    before = open_descriptors()
    gc.collect()
    gc.disable()
    try:
        result = call()
        now = open_descriptors()
    finally:
        gc.enable()
    return result, {fd: what for fd, what in now.items() if before.get(fd) != what}


def left_open(before: dict[int, str], allowed: int, settle: float = 2.0) -> dict[int, str]:
    """The descriptors open now that were not in `before`. When there are more than `allowed`: looked at again after
    a garbage collection, then until `settle` seconds have passed (a test's threads may still be closing theirs)."""
    return _settled(lambda: _new(before), lambda new: len(new) <= allowed, settle)


def still_open(descriptors: dict[int, str], settle: float = 2.0) -> dict[int, str]:
    """Those of `descriptors` still open as the same thing, after a garbage collection and up to `settle` seconds."""
    return _settled(lambda: _same(descriptors), lambda found: not found, settle)


def _settled(look: Callable[[], dict[int, str]], fine: Callable[[dict[int, str]], bool],
             settle: float) -> dict[int, str]:
    """What `look` finds once `fine`, or when `settle` seconds are over: the first look again after a garbage
    collection (an object in a reference cycle closes its descriptor only when collected), then every 50 ms."""
    found, collected, deadline = look(), False, time.monotonic() + settle
    while not fine(found) and time.monotonic() < deadline:
        if collected:
            time.sleep(0.05)
        else:
            gc.collect()
            collected = True
        found = look()
    return found


def _same(descriptors: dict[int, str]) -> dict[int, str]:
    now = open_descriptors() if descriptors else {}
    return {fd: what for fd, what in descriptors.items() if now.get(fd) == what}


def _new(before: dict[int, str]) -> dict[int, str]:
    if len(os.listdir(_FDS)) - 1 <= len(before):  # (the cheap look first; -1: the listing's own descriptor)
        return {}
    return {fd: what for fd, what in open_descriptors().items()
            if before.get(fd) != what and not what.startswith(_LIBRARIES)}


def described(descriptors: dict[int, str]) -> str:
    """`3 socket, 2 pipe, 1 /tmp/x/store.db` (kinds of socket and pipe counted; files named)."""
    kinds = collections.Counter(what.split(":")[0] if ":[" in what else what for what in descriptors.values())
    return ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
