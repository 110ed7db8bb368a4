"""`claw build --remote`: the pull before the build fetches what the build's plan needs, nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import SECRET, Workspace, write_yaml


def ok(*args: str, cwd: Path) -> str:
    proc = claw(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    return proc.stdout


def build(ws: Workspace, suite: str, evaluation: str | None, *extra: str) -> None:
    ok("build", "--suite", suite, "--run-profile", "rp",
       *(("--evaluation-profile", evaluation) if evaluation else ()), *extra, cwd=ws.root)


def team(tmp_path: Path) -> Workspace:
    """Suite main (alpha, beta) with evaluation profile ev; suite other (gamma, delta), × models m1, m2."""
    ws = Workspace(tmp_path / "a")
    for case, prompt in (("alpha", "What is 2 + 2?"), ("beta", "Name a colour."), ("gamma", "Name a city."),
                         ("delta", "Name a river.")):
        ws.case(case, prompt)
    ws.suite("main", ["m1", "m2"], case_selection={"include_case_ids": ["alpha", "beta"]})
    ws.suite("other", ["m1", "m2"], case_selection={"include_case_ids": ["gamma", "delta"]})
    ws.run_profile()
    eval_profile(ws, repetitions=2)
    return ws


def record_ids(ws: Workspace, suite: str) -> list[str]:
    rows = json.loads(ok("query", f"select record_id from runs where suite_id = '{suite}'", "--format", "json",
                         cwd=ws.root))
    return [row["record_id"] for row in rows]


def test_a_build_with_a_remote_pulls_what_its_plan_needs(provider: StandIn, remote_url: str, tmp_path: Path
                                                         ) -> None:
    provider.script(JUDGE, *[judge_reply(7)] * 8)
    a = team(tmp_path)
    remote = remote_url
    build(a, "main", "ev")
    build(a, "other", None)
    paid = len(provider.requests)
    assert paid == 4 + 8 + 4  # main's runs and judgements (2 repetitions), other's runs
    ok("push", remote, cwd=a.root)

    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok("remote", "add", "team", remote, cwd=b.root)
    build(b, "main", "ev", "--remote", "team")
    assert len(provider.requests) == paid, "runs, checks, judgements and results came with the pull"
    assert record_ids(b, "main") and sorted(record_ids(b, "main")) == sorted(record_ids(a, "main"))
    store = Store(b.root / "store", create=False)
    assert not any(store.has(record) for record in record_ids(a, "other")), "another campaign stayed there"

    # Another campaign of the same runs and judges (only the aggregation differs): the remote has no
    # head for it, the results it needs are found by their keys.
    c = Workspace(tmp_path / "c")
    shutil.copytree(a.configs, c.configs)
    profile = c.configs / "evaluation_profiles" / "ev.yaml"
    eval_profile(c, repetitions=2, method="mean", evaluation_profile_id="mean")
    profile.rename(profile.with_name("mean.yaml"))
    eval_profile(c, repetitions=2)
    write_yaml(c.root / "claw.yaml", {"remotes": {"team": {"url": remote}}})
    build(c, "main", "mean", "--remote", "team")
    assert len(provider.requests) == paid, "the runs and judgements another campaign paid for were reused"
    ok("fsck", cwd=c.root)
