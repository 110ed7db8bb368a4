"""Telling which path a build took: the stamp's copy of a printed row is marked, and the mark shows in
the build's output only when the stamp answered (clawstore/builder/stamp.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawstore.builder.stamp import STAMPS_DIR

MARK = "answered-by-stamp"


def mark_stamp(store_root: Path) -> None:
    """Mark the store's one stamp: a printed row's status, and a model of one run among its layers (what
    `claw status` and `build --dry-run` print from it)."""
    stamps = list((store_root / STAMPS_DIR).glob("*.json"))
    assert len(stamps) == 1, stamps
    doc = json.loads(stamps[0].read_text())
    doc["rows"][0]["status"] = MARK
    doc["layers"].append([MARK, {"run": 1}])
    stamps[0].write_text(json.dumps(doc))


def answered_by_stamp(result: dict[str, Any]) -> bool:
    """Did the build whose JSON output this is answer from the (marked) stamp?"""
    return any(row["status"] == MARK for row in result["rows"])
