"""Python's cyclic garbage collector, paused while a build plans.

Planning a large campaign allocates hundreds of thousands of short-lived, acyclic dicts (documents,
keys, nodes); the collector's repeated passes over them cost about a third of a no-op build. Nothing
planning creates needs the cycle collector, so it is off until nodes start executing (threads,
HTTP clients and exceptions do make cycles), and on again at the end either way.

While a build executes, full collections are made rare (`collect_fully_seldom`): a window's nodes and rows outlive
the young generations, so after every tenth generation-1 pass (Python's default) a full pass walked them all again,
finding no cycle there, more often the bigger the campaign.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.disable()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)  # (a build's rare full collections end with it: collect_fully_seldom)
        if was_enabled:
            resume_collector()  # what the build made lives until the command ends: freeze it too


def resume_collector() -> None:
    """Executing work from here on: let the collector run again. What planning built stays alive for
    the whole build, so it is frozen first: the collector never walks it again."""
    if not gc.isenabled():
        gc.freeze()
        _unfreeze_at_exit()
        gc.enable()


# Generation-1 collections between two full ones while a build executes (Python's default: 10). A full pass over a
# window's live nodes found no cycle to free in cold builds of 1,000-5,000 cases; a cycle that does reach the oldest
# generation is still freed, by a later full pass.
FULL_EVERY = 100


def collect_fully_seldom() -> None:
    """From here on a full collection comes after FULL_EVERY generation-1 ones, not ten (docs/building.md,
    Session 51)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_EVERY)


@functools.cache
def _unfreeze_at_exit() -> None:
    # The final collection at shutdown must see frozen objects, so extension types are finalised.
    atexit.register(gc.unfreeze)
