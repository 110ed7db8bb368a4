"""`claw build --remote`: the pull before the build fetches what the build's plan needs, nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawstore.builder.api import CampaignRequest, load_campaign, unbuilt_keys
from clawstore.remote import pull
from clawstore.remote.config import Remote
from clawstore.remote.pull import pull_for_plan
from clawstore.remote.push import push
from clawstore.store import Store, reach
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.faults.helpers import head_nodes
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.prepared import claw_real_or_here, ok_here
from tests.support.storefiles import lose_object
from tests.support.workspace import SECRET, Workspace, write_yaml


def ok(*args: str, cwd: Path) -> str:
    proc = claw(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    return proc.stdout


def build(ws: Workspace, suite: str, evaluation: str | None, *extra: str) -> None:
    """The build a test is about: a real `claw` process."""
    ok("build", "--suite", suite, "--run-profile", "rp",
       *(("--evaluation-profile", evaluation) if evaluation else ()), *extra, cwd=ws.root)


def prepare(ws: Workspace, suite: str, evaluation: str | None, *extra: str) -> None:
    """A build that prepares what the test is about: in this process (tests/support/prepared.py)."""
    ok_here("build", "--suite", suite, "--run-profile", "rp",
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
    rows = json.loads(ok_here("query", f"select record_id from runs where suite_id = '{suite}'", "--format", "json",
                              cwd=ws.root))
    return [row["record_id"] for row in rows]


def test_a_build_with_a_remote_pulls_what_its_plan_needs(provider: StandIn, remote_url: str, tmp_path: Path
                                                         ) -> None:
    provider.script(JUDGE, *[judge_reply(7)] * 8)
    a = team(tmp_path)
    remote = remote_url
    prepare(a, "main", "ev")
    prepare(a, "other", None)
    paid = len(provider.requests)
    assert paid == 4 + 8 + 4  # main's runs and judgements (2 repetitions), other's runs
    ok_here("push", remote, cwd=a.root)

    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok_here("remote", "add", "team", remote, cwd=b.root)
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
    ok_here("fsck", cwd=c.root)


@pytest.mark.parametrize("remote_url", ["s3"], indirect=True)  # (the directory backend: conftest.py)
def test_a_campaign_pulled_whole_is_planned_once(provider: StandIn, remote_url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Each round of the pull before a build plans the whole campaign again (seconds at 10,000 runs).
    provider.script(JUDGE, *[judge_reply(7)] * 8)
    a = team(tmp_path)
    prepare(a, "main", "ev")
    ok_here("push", remote_url, cwd=a.root)
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    monkeypatch.chdir(b.root)
    campaign = load_campaign(CampaignRequest(b.root, "main", "rp", "ev"))
    store = Store(b.root / "store")
    plans: list[int] = []

    def counted() -> set[str]:
        plans.append(1)
        return unbuilt_keys(campaign, store)

    remote = Remote("team", remote_url)
    pull_for_plan(store, remote, f"campaigns/{campaign.campaign_id}", counted)
    assert len(plans) == 1  # the head's closure came first: every planned key has its entry
    assert unbuilt_keys(campaign, store) == set()  # nothing left to execute
    plans.clear()
    pull_for_plan(store, remote, f"campaigns/{campaign.campaign_id}", counted)  # the next build's
    assert len(plans) == 1


@pytest.mark.parametrize("remote_url", ["s3"], indirect=True)  # (the directory backend: conftest.py)
def test_a_push_of_a_head_the_remote_already_holds_walks_nothing(provider: StandIn, remote_url: str,
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The push at the end of every `build --remote` names the campaign head; after a no-op build the
    # remote holds it already, and walking its closure took seconds at 10,000 runs.
    provider.script(JUDGE, *[judge_reply(7)] * 16)
    a = team(tmp_path)
    prepare(a, "main", "ev")
    ref = "campaigns/main__rp__ev"
    store = Store(a.root / "store", create=False)
    assert store.get_ref(ref) is not None
    remote = Remote("team", remote_url)
    walks: list[str] = []
    real = reach.head_closure

    def counted(source: Store, head: str) -> reach.HeadClosure:
        walks.append(head)
        return real(source, head)

    monkeypatch.setattr(reach, "head_closure", counted)
    first = push(store, remote, [ref])
    assert walks == [store.get_ref(ref)] and first.objects > 0 and first.refs_moved == [ref]
    again = push(store, remote, [ref])
    assert walks == [store.get_ref(ref)] and again.objects == 0 and again.refs_moved == []
    a.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][-1].update(content="What is 3 + 3?"))
    prepare(a, "main", "ev")
    moved = push(store, remote, [ref])
    assert walks[-1] == store.get_ref(ref) and moved.objects > 0 and moved.refs_moved == [ref]


@pytest.mark.parametrize("remote_url", ["s3"], indirect=True)  # (the directory backend: conftest.py)
def test_a_build_whose_head_the_remote_holds_walks_no_closure(provider: StandIn, remote_url: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The pull before every `build --remote` walked the remote head's closure (every record, seconds
    # at 10,000 runs) even when this store holds that very head: the plan tells what is missing.
    provider.script(JUDGE, *[judge_reply(7)] * 8)
    a = team(tmp_path)
    prepare(a, "main", "ev", "--remote", remote_url)
    monkeypatch.chdir(a.root)
    campaign = load_campaign(CampaignRequest(a.root, "main", "rp", "ev"))
    store = Store(a.root / "store", create=False)
    walks: list[list[str]] = []
    real = pull._fetch_closure

    def counted(state: pull._Pull, roots: list[str]) -> None:
        walks.append(list(roots))
        real(state, roots)

    monkeypatch.setattr(pull, "_fetch_closure", counted)
    pull_for_plan(store, Remote("team", remote_url), f"campaigns/{campaign.campaign_id}",
                  lambda: unbuilt_keys(campaign, store))
    assert walks == []


@pytest.mark.parametrize("remote_url", ["s3"], indirect=True)  # (the directory backend: conftest.py)
def test_what_this_store_lost_comes_back_from_the_remote_before_the_build(provider: StandIn, remote_url: str,
                                                                          tmp_path: Path) -> None:
    # B pulled A's campaign, then lost a run's answer and a judgement's record (a bad disk; fsck
    # --repair quarantines such objects): the next `build --remote` fetches them again instead of paying.
    provider.script(JUDGE, *[judge_reply(7)] * 8)
    a = team(tmp_path)
    prepare(a, "main", "ev", "--remote", remote_url)
    paid = len(provider.requests)
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    build(b, "main", "ev", "--remote", remote_url)
    assert len(provider.requests) == paid
    store = Store(b.root / "store", create=False)
    nodes = head_nodes(store, "main__rp__ev")
    run = next(n for n in nodes if n["kind"] == "run")
    judgement = next(n for n in nodes if n["kind"] == "judge")
    answer = store.get_json(run["record"])["outputs"]["artifact"]
    lose_object(store, answer)
    lose_object(store, judgement["record"])
    assert not store.has(answer) and not store.has(judgement["record"])
    build(b, "main", "ev", "--remote", remote_url)
    assert len(provider.requests) == paid, "what the remote holds was fetched, not paid for again"
    assert store.has(answer) and store.has(judgement["record"])
    ok_here("fsck", cwd=b.root)


@pytest.mark.parametrize("remote_url", ["s3"], indirect=True)  # (the directory backend: conftest.py)
def test_a_plan_with_a_remote_counts_only_what_the_remote_does_not_hold(provider: StandIn, remote_url: str,
                                                                         tmp_path: Path) -> None:
    # What will `build --remote` cost? Before, `claw plan` counted every run and judgement a colleague
    # had already paid for: a campaign fully on the remote planned 12 requests and sent none.
    provider.script(JUDGE, *[judge_reply(7)] * 12)
    a = team(tmp_path)
    prepare(a, "main", "ev")
    ok_here("push", remote_url, cwd=a.root)
    paid = len(provider.requests)
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok_here("remote", "add", "team", remote_url, cwd=b.root)
    b.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    plan = ("plan", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev", "--output", "json")
    assert json.loads(ok_here(*plan, cwd=b.root))["requests"] == 4 + 8  # without the remote: everything (the
    # figure the remote's plan is compared with: in this process)
    planned = json.loads(ok(*plan, "--remote", "team", cwd=b.root))
    assert planned["requests"] == 2 + 4  # beta's runs, and their judgements (2 repetitions)
    assert len(provider.requests) == paid, "planning sent nothing"
    build(b, "main", "ev", "--remote", "team")
    assert len(provider.requests) == paid + planned["requests"]


def test_a_remote_url_nobody_can_reach_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    # build/plan --remote used to open (create) the store and only then learn the scheme was unknown.
    a = team(tmp_path)
    # (each command and each URL by a real process once, the other two in this process: the same front)
    for command, url, real in (("build", "ftp://host/runs", True), ("build", "s3:///no-bucket", False),
                               ("plan", "ftp://host/runs", False), ("plan", "s3:///no-bucket", True)):
        args = (command, "--suite", "main", "--run-profile", "rp", "--remote", url)
        code, _, err = claw_real_or_here(*args, cwd=a.root, real=real)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert url in err and "Traceback" not in err
    assert not (a.root / "store").exists()
    refused = claw("remote", "add", "team", "ftp://host/runs", cwd=a.root)
    assert refused.returncode == 2 and "unknown scheme 'ftp'" in refused.stderr
    (a.root / "claw.yaml").write_text("remotes:\n  team: {url: 'ftp://host/runs'}\n", encoding="utf-8")
    refused = claw("pull", "team", cwd=a.root)
    assert refused.returncode == 2 and "remotes.team.url" in refused.stderr and "unknown scheme" in refused.stderr
    assert not (a.root / "store").exists()


@pytest.mark.parametrize("remote_url", ["dir"], indirect=True)
def test_a_head_ref_that_is_no_ref_is_named_by_build_remote_and_refused_by_its_push(provider: StandIn,
                                                                                       remote_url: str, tmp_path: Path
                                                                                       ) -> None:
    # The pull before a build skipped a remote head holding garbage without a word (`claw pull` names it).
    provider.script(JUDGE, *[judge_reply(7)] * 8)
    a = team(tmp_path)
    prepare(a, "main", "ev")
    paid = len(provider.requests)
    ok_here("push", remote_url, cwd=a.root)
    [head] = [path for path in (Path(remote_url) / "refs" / "campaigns").rglob("*") if path.is_file()]
    head.write_text("not an id\n")
    name = head.relative_to(Path(remote_url) / "refs").as_posix()

    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    done = claw("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                "--remote", remote_url, cwd=b.root)
    lines = done.stderr.splitlines()
    assert f"claw: remote ref {name} skipped: holds no object id" in lines
    assert len(provider.requests) == paid, "the results came by their keys"
    assert sorted(record_ids(b, "main")) == sorted(record_ids(a, "main"))
    # Its push at the end cannot move that ref: named as damage to remove (exit 2), not "changed by another push:
    # run claw pull" (a pull skips it: the advice would loop).
    assert done.returncode == 2 and lines[-1] == (
        f"claw: error: remote {remote_url}: ref refs/{name} holds no object id: remove it from the remote, then push "
        "again"), done.stderr
    assert head.read_text() == "not an id\n"
