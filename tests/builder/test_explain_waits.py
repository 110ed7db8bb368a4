"""`claw explain` of the checks and judgements that wait for a run: built before (its inputs changed) or never."""

from __future__ import annotations

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace


def test_explain_tells_an_edited_run_from_a_new_one(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    eval_profile(ws, repetitions=1)
    ws.suite("main", ["m1"])
    standin.script(JUDGE, judge_reply(7))
    standin.script("*", text("4"))
    assert claw.build("--evaluation-profile", "ev")[0] == 0
    ws.case("alpha", "What is 2 + 3?")  # built before: its prompt changed
    ws.case("gamma", "A new case?")  # never built
    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert code == 0, err
    blocks = {block.splitlines()[0].split(" (")[0]: block for block in _blocks(out)}
    assert blocks["checks m1 alpha rep 0"].endswith(
        "waits for its run (the run was built, but its inputs changed since: it runs again first)")
    assert blocks["judge m1 gamma rep 0 main #0"].endswith("waits for its run (the run has never been built)")
    assert "has not been built" not in out


def _blocks(out: str) -> list[str]:
    """Each node's heading line with the reason lines under it."""
    found: list[str] = []
    for line in out.splitlines():
        if line.startswith("  ") and found:
            found[-1] += "\n" + line
        else:
            found.append(line)
    return found
