"""Directories nested deeper than a recursive walk or a long path allows, made one level at a time
(as a shell's `mkdir d; cd d` loop does), so no path ever passes the system's limit while making them."""

from __future__ import annotations

import os
from pathlib import Path


def nest(root: Path, depth: int, name: str = "d") -> Path:
    """`depth` directories named `name`, one inside the other, under `root`; a file at the bottom."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as out:
            out.write("deep")
    finally:
        os.close(fd)
    return root
