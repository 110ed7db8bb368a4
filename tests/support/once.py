"""A starting state several tests copy, made once in the whole run, not once in each xdist worker.

A module-scoped fixture is made again in every worker that runs one of its module's tests (up to three times):
a cold `claw build` and push paid three times where once would do. Here the first process of the run to ask makes
it, under a lock in the directory the run's workers share; the others wait for it, then find it made.
A run's key holds the provider's base URL: a test whose own builds must reuse the runs made here cannot start from
it (its stand-in listens on another port, so they are other runs).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

_MADE = ".made"  # written last: a directory without it was left by a maker that failed (made again)


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The directory `make` filled (made where it stays: what it holds may name its own path). Tests copy from it
    (`shutil.copytree(..., symlinks=True)`: copy2 keeps mtimes) and never change it."""
    base = tmp_path_factory.getbasetemp()
    # (an xdist worker's is popen-gwN in the run's; a pytest a worker starts inherits the variable, not the name)
    shared = base.parent if base.name == f"popen-{os.environ.get('PYTEST_XDIST_WORKER')}" else base
    made = shared / f"once-{name}"
    with open(shared / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (made / _MADE).exists():
            shutil.rmtree(made, ignore_errors=True)
            made.mkdir()
            make(made)
            (made / _MADE).touch()
    return made


def copied(made: Path, to: Path, *names: str) -> None:
    """`names` (each a file or directory in `made`) copied under `to`, symlinks kept as links."""
    for name in names:
        shutil.copytree(made / name, to / name, symlinks=True)
