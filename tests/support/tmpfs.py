"""Real filesystems for tests: a tiny tmpfs for a full disk, a read-only bind mount for a read-only store (root only:
skipped elsewhere, failed on CI, where the tests must run)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (as mount takes it: 2m) at `mount` (made), unmounted after."""
    with _mounted(["-t", "tmpfs", "-o", f"size={size}", "tmpfs"], mount, "mount a tmpfs") as done:
        yield done


@contextmanager
def mounted_read_only(source: Path, mount: Path) -> Iterator[Path]:
    """`source` seen read-only at `mount` (made): a bind mount (a shared store mounted read-only; root only: skipped
    elsewhere, failed on CI), unmounted after."""
    with _mounted(["--bind", "-o", "ro", str(source)], mount, "bind-mount read-only") as done:
        yield done


@contextmanager
def _mounted(args: list[str], mount: Path, what: str) -> Iterator[Path]:
    """`mount ARGS MOUNT` (made), unmounted after; skipped where it cannot be done (needs root), failed on CI."""
    mount.mkdir()
    done = subprocess.run(["mount", *args, str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot {what}: {done.stderr.strip()}")
        pytest.skip(f"cannot {what} here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
