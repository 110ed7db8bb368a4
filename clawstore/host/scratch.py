"""Scratch directories that runs fill, removed whatever they hold.

A model's shell command or an agent can nest directories thousands deep (`mkdir -p d/d/d/…`), and
`shutil.rmtree` (like `os.walk` and `TemporaryDirectory`) recurses once per level on Python 3.11: past
about a thousand levels it raises RecursionError, which would fail a run already paid for. `rm -rf`
walks any depth; it is the fallback.

A scratch directory in a store's tmp/ (`writer_scratch_dir`) carries its writer's identity in its name,
like the store's temp files: a killed push or pull leaves it behind, and the store's sweeps of dead
writers' leftovers (store/core/leftovers.py) remove it.
"""

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
