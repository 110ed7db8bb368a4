"""Shared helpers of the fault tests: damaging objects, reading a build's JSON report."""

from __future__ import annotations

import json
from typing import Any

from clawstore.store import Store
from clawstore.store.headdoc import read_head_doc
from tests.support.claw import Claw


def build_report(claw: Claw, *flags: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = claw("build", *flags, "--output", "json")
    assert out, err
    return code, json.loads(out), err


def head_nodes(store: Store, campaign: str) -> list[dict[str, Any]]:
    head_id = store.get_ref(f"campaigns/{campaign}")
    assert head_id is not None
    return read_head_doc(store, head_id)["nodes"]  # type: ignore[no-any-return]
