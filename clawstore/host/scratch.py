"""Scratch directories that runs fill, removed whatever they hold, even nested thousands deep (where `shutil.rmtree`
raises RecursionError and would fail a paid run). Details: docs/runners.md (Details by module)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
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


@contextmanager
def scratch_dir(prefix: str, parent: Path | str | None = None) -> Iterator[str]:
    """`tempfile.TemporaryDirectory`, removed with `remove_tree`."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield path
    finally:
        remove_tree(path)


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
