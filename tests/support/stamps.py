"""Telling which path a build took: the stamp's copy of a printed row is marked, and the mark shows in
the build's output only when the stamp answered (clawstore/builder/stamp.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import blake3

from clawstore.builder.stamp import RACY_NS, STAMPS_DIR

MARK = "answered-by-stamp"


def mark_stamp(store_root: Path) -> None:
    """Mark the store's one stamp: a printed row's status, and a model of one run among its layers (what
    `claw status` and `build --dry-run` print from it)."""
    stamps = list((store_root / STAMPS_DIR).glob("*.json"))
    assert len(stamps) == 1, stamps
    doc = json.loads(stamps[0].read_text())
    rows_file = stamps[0].with_suffix(".rows")
    first, rest = rows_file.read_bytes().split(b"\n", 1)
    rows = json.dumps({**json.loads(first), "status": MARK}).encode() + b"\n" + rest
    rows_file.write_bytes(rows)
    doc["rows"] = {"bytes": len(rows), "blake3": blake3.blake3(rows).hexdigest()}  # (the stamp names its rows file)
    doc["layers"].append([MARK, {"run": 1}])
    stamps[0].write_text(json.dumps(doc))


def answered_by_stamp(result: dict[str, Any]) -> bool:
    """Did the build whose JSON output this is answer from the (marked) stamp?"""
    return any(row["status"] == MARK for row in result["rows"])


def wait_out_racy_window(root: Path) -> None:
    """Sleep until every file and directory in the workspace `root` (its store/ left out) changed more than the
    stamp's window (RACY_NS) ago, so the next build may leave a stamp: only what is left of the window, not all
    of it again (a build before this has already spent most of it; a fixed 2.1 s was about 30 s of the suite)."""
    newest = 0
    for folder, dirs, files in os.walk(root):
        if folder == str(root):
            dirs[:] = [d for d in dirs if d != "store"]
        for name in (*dirs, *files):
            st = os.lstat(os.path.join(folder, name))
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    wait_s = (newest + RACY_NS + 100_000_000 - time.time_ns()) / 1e9
    if wait_s > 0:
        time.sleep(wait_s)
