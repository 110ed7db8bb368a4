"""Scratch directories that runs fill, removed whatever they hold.

A model's shell command or an agent can nest directories thousands deep (`mkdir -p d/d/d/…`), and
`shutil.rmtree` (like `os.walk` and `TemporaryDirectory`) recurses once per level on Python 3.11: past
about a thousand levels it raises RecursionError, which would fail a run already paid for. `rm -rf`
walks any depth; it is the fallback.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
