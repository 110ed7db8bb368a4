"""A build SIGKILLed while another build of the same campaign runs beside it: the other takes over its nodes, pays for
none twice but the killed one's requests in flight, and leaves none of the killed writer's leftovers (its claims' temp
files, its leases) behind it (real `claw` processes, the stand-in server, a real SIGKILL)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path

from clawstore.testing.standin import StandIn, held
from tests.hostile.attack import CLAW, run_claw
from tests.support.claw import env, requests_sent  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def _one_killed_beside_one_that_ends(ws: Workspace, standin: StandIn) -> tuple[str, str]:
    """Two builds of `ws`'s campaign, answers held: the first holds two nodes' claims, the second takes the two
    others; the first is SIGKILLed with its two requests in flight, then the answers go. The second's stdout and
    stderr, once it has ended well."""
    ws.run_profile(concurrency=2, defaults={"timeout_seconds": 60})  # (held answers: never a timeout's retry)
    standin.set_default(held("answers"))
    first = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        requests_sent(standin, 2)  # the first build holds two nodes' claims, its requests held
        second = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        requests_sent(standin, 4)  # the second took the two others
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    standin.release("answers")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, out + err
    return out, err


def test_a_build_killed_beside_another_leaves_nothing_once_the_other_ends(tmp_path: Path, standin: StandIn,
                                                                         env: dict[str, str]) -> None:  # noqa: F811
    """Session 72's kill fuzzer: two builds at once, one killed. The survivor ran to the end (and the next build, a
    no-op its stamp answers, removes nothing); `claw fsck` counted the killed one's claim files and leases, stale:
    a build removed a dead writer's leftovers at its start only, when the killed one was still alive."""
    ws = standard(tmp_path / "ws")  # 2 cases x 2 models, 2 at once
    _one_killed_beside_one_that_ends(ws, standin)
    asked = Counter((r["model"], r["messages"][-1]["content"]) for r in standin.requests)
    assert len(asked) == 4 and sum(asked.values()) == 6, asked  # the killed one's two in flight, asked again

    fsck = run_claw(ws.root, "fsck")
    assert fsck.code == 0, fsck
    assert re.search(r"temp files: \d+ \(0 stale\); stale leases: 0;", fsck.stdout + fsck.stderr), fsck


def test_a_node_the_killed_build_finished_is_not_paid_again_by_the_build_beside(tmp_path: Path, standin: StandIn,
                                                                               env: dict[str, str]) -> None:  # noqa: F811
    """Killed the moment its progress said a run finished (its record written into its pack, not yet indexed: the
    0.25 s commit window), the build holds that node's claim still. The build beside, waiting on the claim, takes it
    over from the dead holder and looks the node up in the index: there it is not yet. Before session 72 it asked
    again for the answer the killed build had written (what `claw status` or a build starting then adopts)."""
    ws = Workspace(tmp_path / "ws")
    for i in range(1, 5):
        ws.case(f"c{i}", f"Question {i}: name a thing.")
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=2, defaults={"timeout_seconds": 60})  # (held answers: never a timeout's retry)
    standin.script("vendor/m1", held("first"), match="Question 1:")
    standin.set_default(held("rest"))
    first = subprocess.Popen([CLAW, "build", *CAMPAIGN, "--progress", "plain"], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        requests_sent(standin, 2)  # c1 and c2, claimed by the first build
        second = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        requests_sent(standin, 4)  # c3 and c4 by the second, which waits for c1's and c2's claims
        standin.release("first")
        assert first.stderr is not None
        for line in first.stderr:
            if "run/m1/c1/0: success" in line:
                break
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
        standin.release("rest")
    assert second is not None
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, out + err
    asked = Counter(r["messages"][-1]["content"].split(":")[0] for r in standin.requests)
    # c2 was in flight at the kill (paid, never answered to claw): asked again; c1 was answered and written
    assert asked == {"Question 1": 1, "Question 2": 2, "Question 3": 1, "Question 4": 1}, asked
    # and c1, adopted (another build paid for it), is not spent by this one: its progress said so before session 73
    # (`[runs 4/4] … spent 0.000056 USD` beside the summary's `3 executed, 1 reused; … cost spent 0.000042 USD`)
    summary = re.search(r"3 executed, 1 reused, .* cost spent (\S+) USD", out)
    progress = [line for line in err.splitlines() if line.startswith("[runs ")]
    assert summary is not None and progress and progress[-1].endswith(f"spent {summary.group(1)} USD"), (out, err)


KILLED = "was killed before it finished: by its log's last write it had executed"


def test_a_build_killed_beside_a_build_that_finishes_is_still_named(tmp_path: Path, standin: StandIn,
                                                                   env: dict[str, str]) -> None:  # noqa: F811
    """Two builds of one campaign (two terminals, CI and a laptop on one store), the first SIGKILLed with requests in
    flight (paid, never answered to claw). Before session 73 the survivor said nothing of it, and once its head moved
    (past the killed build's start) `claw status` and `claw report` stopped naming it: its spending was shown nowhere
    but in `claw query`'s builds (running, cost NULL). Now the survivor names it at its end, status and report go on
    naming it, and the next build, which found it killed at its start, names it once more and settles it."""
    ws = standard(tmp_path / "ws")  # 2 cases x 2 models, 2 at once
    out, err = _one_killed_beside_one_that_ends(ws, standin)
    [journal] = [p for p in Path(env["CLAW_STORE"]).rglob("*.jsonl") if p.parent.name == "builds"]  # (the killed's)
    killed = journal.stem
    assert KILLED in err and killed in err, err  # the survivor's summary names it
    # (what follows in this process: the store, the notes and the rule are the same)

    status = run_here(ws.root, "status", *CAMPAIGN)
    assert status.code == 0 and KILLED in status.stderr and killed in status.stderr, status
    assert "spent an unknown amount" in status.stderr and "0.000000" not in status.stderr, status
    report = run_here(ws.root, "report", *CAMPAIGN, "--no-chart")
    assert report.code == 0 and KILLED in report.stderr and killed in report.stderr, report
    view = run_here(ws.root, "view", *CAMPAIGN, "--out", str(tmp_path / "view.html"))
    assert view.code == 0 and KILLED in view.stderr and killed in view.stderr, view

    again = run_here(ws.root, "build", *CAMPAIGN)  # (a no-op its stamp answers: it found the killed one at its start)
    assert again.code == 0 and KILLED in again.stderr and killed in again.stderr, again
    assert KILLED not in run_here(ws.root, "status", *CAMPAIGN).stderr
    assert KILLED not in run_here(ws.root, "build", *CAMPAIGN).stderr
