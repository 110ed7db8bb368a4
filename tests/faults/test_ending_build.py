"""A build that is ending, not killed: between the last node and its sealed log it moves the campaign head (for a large
campaign, seconds). Until session 73 it let its lease go before that, so its log, still `running` with its journal
beside it and no live lease, looked like a killed build's: `claw status` beside it said "build ... was killed before
it finished", and a `claw build` beside it wrote `told_by` into a log its live writer was about to seal (session 73's
kill fuzzer, /work/helpers/s73/fuzz_f). The commands beside run as real processes at the moment the build seals its
log (the build in the test's process: the moment is chosen by wrapping the seal, which then runs as it is)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import buildlog
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 - fixtures

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
KILLED = "was killed before it finished"


def test_a_build_sealing_its_log_is_not_named_killed_beside_it(claw: Claw, env: dict[str, str],  # noqa: F811
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    seal = buildlog.seal_build_log

    def status_then_seal(*args: Any, **kwargs: Any) -> Path:
        done = subprocess.run([sys.executable, "-m", "clawstore.cli", "status", *CAMPAIGN], cwd=claw.root,
                              env=dict(os.environ), capture_output=True, text=True, timeout=60)
        seen.append(done.stderr)
        return seal(*args, **kwargs)

    monkeypatch.setattr(buildlog, "seal_build_log", status_then_seal)
    code, out, err = claw.build()
    assert code == 0, out + err
    assert len(seen) == 1 and KILLED not in seen[0], seen
    code, out, err = claw("query", "select build_id, state from builds", "--format", "json")
    assert code == 0 and [row["state"] for row in json.loads(out)] == ["complete"], out + err
