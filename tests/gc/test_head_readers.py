"""A read command beside a build and a gc: `claw status` (or `report`, `view`, `compare`) has read the campaign ref
and is about to read the head it names when a build moves the ref on and `claw gc --grace 0` runs (real processes: the
reader is stopped there by tests/gc/proc_head_read.py). Session 74's race fuzzer: the reader held no lease, gc deleted
the head it was reading, and it said the store was damaged and sent the user to `claw fsck --repair`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
PROC = Path(__file__).with_name("proc_head_read.py")


def _edit(ws: Workspace) -> None:
    """Both cases' prompts changed: a build after it writes a head sharing no part with the one before."""
    ws.case("alpha", "What is 3 + 3?")
    ws.case("beta", "Name a shape.")


def _beside_build_and_gc(ws: Workspace, stop_in: str, *command: str) -> subprocess.CompletedProcess[str]:
    """`claw COMMAND` stopped before it reads (in function `stop_in`) the head it found, a build moving the ref on and a
    gc meanwhile."""
    reader = subprocess.Popen([sys.executable, str(PROC), *command], cwd=ws.root,
                              env={**os.environ, "STOP_IN": stop_in}, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert reader.stderr is not None and reader.stdin is not None
    said = reader.stderr.readline()
    try:
        assert said == "at head\n", said + reader.stderr.read()
        _edit(ws)
        assert run_here(ws.root, "build", *CAMPAIGN).code == 0
        gc = run_here(ws.root, "gc", "--grace", "0")
        assert gc.code == 0, gc
    finally:
        out, err = reader.communicate("go\n", timeout=60)
    return subprocess.CompletedProcess(reader.args, reader.returncode, out, said + err)


@pytest.mark.parametrize(("stop_in", "command"), [("__init__", ("status", *CAMPAIGN)),  # (HeadByCases)
                                                  ("_read_head", ("report", *CAMPAIGN, "--no-chart")),
                                                  ("_read_head", ("view", *CAMPAIGN, "--out", "page.html")),
                                                  ("read_side", ("compare", "main__rp__none", "main__rp__none"))],
                         ids=["status", "report", "view", "compare"])
def test_a_reader_beside_a_build_and_gc_reads_a_head_whole(tmp_path: Path, standin: StandIn, env: dict[str, str],  # noqa: F811
                                                           stop_in: str, command: tuple[str, ...]) -> None:
    """Before session 74: `claw status` exit 3, "ref campaigns/… points at blake3:…, which is not in the store: run
    `claw fsck --repair`"; `claw report` exit 2, "ref campaigns/… points at missing object … (run claw fsck)"; `claw
    view` the same, and `claw compare` exit 3 "object … is not in the store", until the end of session 74. The store
    was whole (fsck exits 0 after)."""
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    if command[0] == "status":
        _edit(ws)  # (stale: status reads the head; a fresh campaign is answered by its stamp)
    done = _beside_build_and_gc(ws, stop_in, *command)
    assert done.returncode == 0, done.stderr
    assert "fsck" not in done.stderr and "not in the store" not in done.stderr, done.stderr
    if command[0] == "compare":  # (no judge: no scores to show, both sides named)
        assert "A = campaigns/main__rp__none" in done.stdout and "B = campaigns/" in done.stdout, done.stdout
    else:
        shown = (ws.root / "page.html").read_text() if command[0] == "view" else done.stdout
        assert "m1" in shown and "m2" in shown, shown[-2000:]
    fsck = run_here(ws.root, "fsck")
    assert fsck.code == 0, fsck
