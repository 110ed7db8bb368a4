"""Python's cyclic garbage collector, paused while a build plans.

Planning a large campaign allocates hundreds of thousands of short-lived, acyclic dicts (documents,
keys, nodes); the collector's repeated passes over them cost about a third of a no-op build. Nothing
planning creates needs the cycle collector, so it is off until nodes start executing (threads,
HTTP clients and exceptions do make cycles), and on again at the end either way.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            resume_collector()  # what the build made lives until the command ends: freeze it too


def resume_collector() -> None:
    """Executing work from here on: let the collector run again. What planning built stays alive for
    the whole build, so it is frozen first: the collector never walks it again."""
    if not gc.isenabled():
        gc.freeze()
        _unfreeze_at_exit()
        gc.enable()


@functools.cache
def _unfreeze_at_exit() -> None:
    # The final collection at shutdown must see frozen objects, so extension types are finalised.
    atexit.register(gc.unfreeze)
