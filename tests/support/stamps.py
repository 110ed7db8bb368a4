"""Telling which path a build took: the stamp's copy of a printed row is marked, and the mark shows in
the build's output only when the stamp answered (clawstore/builder/stamp.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import blake3

from bench._workspace import wait_out_racy_window
from clawstore.builder.stamp import STAMPS_DIR

__all__ = ["MARK", "answered_by_stamp", "mark_stamp", "stampless_answers",
           "wait_out_racy_window"]  # (the last: bench's, one for both)

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


def stampless_answers(claw: Callable[..., tuple[int, str, str]], store: Path, commands: Sequence[tuple[str, ...]],
                      campaign: Sequence[str]) -> list[tuple[int, str, str]]:
    """Each of `commands` (of `campaign`) as text then JSON, its (exit code, stdout, stderr), none answered by a stamp
    (the store's stamps removed before each)."""
    found = []
    for command in commands:
        for output in ("text", "json"):
            shutil.rmtree(store / STAMPS_DIR, ignore_errors=True)
            found.append(claw(*command, *campaign, "--output", output))
    return found
