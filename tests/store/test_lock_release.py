"""A store lock is released when its holder leaves it, even while a child forked meanwhile (a `claw build` that
the holder's thread was starting, not yet exec'd) still has the descriptor: gc's lock is taken with no wait, and a
gc loop beside a build it started once failed 'lock gc is held by another process'."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from clawstore.store.core import locks


def test_a_lock_left_is_free_though_a_child_forked_while_it_was_held_lives_on(tmp_path: Path) -> None:
    (tmp_path / locks.LOCKS).mkdir()
    with locks.exclusive(tmp_path, "gc"):
        child = os.fork()
        if child == 0:  # the child keeps the inherited descriptor and never execs
            time.sleep(30)
            os._exit(0)
    try:
        with locks.exclusive(tmp_path, "gc", timeout=0.0):
            pass  # taken at once
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
