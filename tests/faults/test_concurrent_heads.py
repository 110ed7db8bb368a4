"""Two builds of one campaign at once, one planned before a config edit and ending after a build planned after it
(real `claw` processes, the stand-in's answers held): the head the later-ending build writes keeps what the other
added, so a `claw gc` after both deletes nothing they paid for (session 74's race fuzzer)."""

from __future__ import annotations

import os
import subprocess
from collections import Counter

from clawstore.testing.standin import StandIn, held, text
from tests.hostile.attack import CLAW
from tests.support.claw import env, requests_sent  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.workspace import standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def test_a_case_added_and_built_while_an_earlier_build_runs_is_kept_by_gc(tmp_path, standin: StandIn,
                                                                           env: dict[str, str]) -> None:  # noqa: F811
    """A user adds a case while a long build runs and builds just that case (`--case`): paid, it is in the head. The
    long build, planned before the case existed, ends later. Before session 74 the head it wrote dropped the case (it
    kept only the addresses it planned), `claw status` still said the case fresh (its records were in the action
    cache), `claw gc --grace 0` deleted them, and the next build paid for the case again."""
    ws = standard(tmp_path / "ws")  # alpha, beta x m1, m2
    ws.run_profile(concurrency=4, defaults={"timeout_seconds": 60})  # (held answers: never a timeout's retry)
    standin.set_default(held("first"))
    standin.script("*", *[text("gamma answer") for _ in range(4)], match="gamma")
    first = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        requests_sent(standin, 4)  # the first build planned alpha and beta and waits for their answers
        ws.case("gamma", "The gamma question?")
        second = run_here(ws.root, "build", *CAMPAIGN, "--case", "gamma")
        assert second.code == 0, second
    finally:
        standin.release("first")
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, out + err
    assert len(standin.requests) == 6

    gc = run_here(ws.root, "gc", "--grace", "0")
    assert gc.code == 0, gc
    again = run_here(ws.root, "build", *CAMPAIGN)
    assert again.code == 0, again
    asked = Counter(r["messages"][-1]["content"] for r in standin.requests[6:])
    assert not asked, asked  # (before: the gamma question asked again of both models)


def test_a_case_removed_is_still_dropped_by_a_build_beside_none(tmp_path, standin: StandIn,
                                                                env: dict[str, str]) -> None:  # noqa: F811
    """What the head keeps otherwise is as before: a build after a case was removed drops it from the head, and gc
    then deletes its records (the removed case is stale, never built, when it comes back)."""
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    (ws.configs / "cases" / "beta" / "test.yaml").unlink()
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "gc", "--grace", "0").code == 0
    ws.case("beta", "Name a colour.")
    before = len(standin.requests)
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert sorted(r["messages"][-1]["content"] for r in standin.requests[before:]) == ["Name a colour."] * 2
