"""Ctrl-C while DuckDB reads the manifest for `claw report` (or `claw view`): one line, exit 130. DuckDB's own look at
Python's signals took the KeyboardInterrupt and raised `RuntimeError: Query interrupted`: a traceback, exit 1, until
session 73 (`claw query` said it right since session 72; the others did not). The Ctrl-C lands at a chosen moment:
strace sends SIGINT as the command opens the manifest's results file, with DuckDB's query under way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.claw import Claw, claw, env, ws  # noqa: F401

REPORT = ("report", "--suite", "main", "--run-profile", "rp")


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace sends the signal at the chosen moment")
def test_ctrl_c_while_duckdb_reads_the_manifest_is_one_line(claw: Claw, env: dict[str, str]) -> None:  # noqa: F811
    assert claw.build()[0] == 0 and claw(*REPORT)[0] == 0  # (the manifest made)
    results = sorted(Path(env["CLAW_STORE"], "manifest").rglob("results.parquet"))
    assert results, "no manifest results file"
    done = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=openat", "-e",
                           "inject=openat:signal=SIGINT:when=1", "-P", str(results[-1]), sys.executable, "-m",
                           "clawstore.cli", *REPORT], cwd=claw.root, capture_output=True, text=True, timeout=120)
    if "strace:" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()}")
    assert (done.returncode, done.stderr) == (130, "claw: interrupted\n"), done.stderr[-2000:]
