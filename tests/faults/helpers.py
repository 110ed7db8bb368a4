"""Shared helpers of the fault tests: damaging objects, reading a build's JSON report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from clawstore.store import Store
from tests.support.claw import Claw


def flip_byte(path: Path, offset: int = -5) -> None:
    """Change one byte of a (read-only) object file in place."""
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def build_report(claw: Claw, *flags: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = claw("build", *flags, "--output", "json")
    assert out, err
    return code, json.loads(out), err


def head_nodes(store: Store, campaign: str) -> list[dict[str, Any]]:
    head_id = store.get_ref(f"campaigns/{campaign}")
    assert head_id is not None
    return store.get_json(head_id)["nodes"]
