"""The team round trip through a remote: nobody pays twice for what a colleague already ran."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.prepared import claw_here, ok_here
from tests.support.workspace import SECRET, Workspace, standard

BUILD = ("build", "--suite", "main", "--run-profile", "rp")


def ok(*args: str, cwd: Path) -> str:
    proc = claw(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    return proc.stdout


def edit_alpha(ws: Workspace) -> None:
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))


def test_team_round_trip(provider: StandIn, remote_url: str, tmp_path: Path) -> None:
    a = standard(tmp_path / "a")
    # Scored by a judge shown a file check's result: its relative path must not name A's directory, or B,
    # whose workspace sits elsewhere, would pay every judgement again.
    eval_profile(a, repetitions=1)
    a.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "notes", "dimensions": ["task"], "declarative": {"kind": "file_exists", "path": "notes.txt"}}]))
    provider.script(JUDGE, judge_reply(7))
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok_here("remote", "add", "team", remote_url, cwd=a.root)
    ok_here("remote", "add", "team", remote_url, cwd=b.root)
    scored = (*BUILD, "--evaluation-profile", "ev")

    ok_here(*scored, cwd=a.root)
    paid_by_a = len(provider.requests)
    assert paid_by_a == 4 + 4  # 2 cases x 2 models, each run judged once
    assert "ref(s) moved" in ok("push", "team", cwd=a.root)

    ok("pull", "team", cwd=b.root)
    ok(*scored, cwd=b.root)
    assert len(provider.requests) == paid_by_a, "B rebuilt what A had paid for"

    edit_alpha(b)
    ok(*scored, cwd=b.root)
    assert len(provider.requests) == paid_by_a + 2 + 2, "only the edited case's runs and judgements"
    ok("push", "team", cwd=b.root)

    edit_alpha(a)  # the same configs (in real life: from version control)
    ok("pull", "team", cwd=a.root)
    ok(*scored, cwd=a.root)
    assert len(provider.requests) == paid_by_a + 2 + 2, "A rebuilt what B had paid for"
    assert ok_here("query", "select count(*) as n from results", "--format", "csv", cwd=a.root).split() == ["n", "4"]
    rows = json.loads(ok_here("query", "select case_id, model_id, action from runs order by 1, 2", "--format",
                              "json", cwd=a.root))
    assert [(r["case_id"], r["model_id"]) for r in rows] == [("alpha", "m1"), ("alpha", "m2"), ("beta", "m1"),
                                                             ("beta", "m2")]
    ok_here("fsck", cwd=a.root)
    ok_here("fsck", cwd=b.root)


def test_a_push_that_would_drop_a_colleagues_head_is_refused(provider: StandIn, tmp_path: Path) -> None:
    remote = str(tmp_path / "shared-remote")
    a = standard(tmp_path / "a")
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok_here(*BUILD, cwd=a.root)
    ok_here(*BUILD, cwd=b.root)  # both built on their own (B's stand-in answers are the same; heads differ)
    ok_here("push", remote, cwd=a.root)
    edit_alpha(b)
    ok_here(*BUILD, cwd=b.root)
    published = sorted(os.listdir(Path(remote) / "packs"))
    refused = claw("push", remote, cwd=b.root)
    assert refused.returncode == 1 and "run claw pull, then push again" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    # Refused before anything was sent: the refs are read (and checked) before the first upload.
    assert sorted(os.listdir(Path(remote) / "packs")) == published
    ok("pull", remote, cwd=b.root)
    ok(*BUILD, cwd=b.root)  # the head now combines both (A's results came with the pull)
    ok("push", remote, cwd=b.root)


def test_pull_of_a_tampered_pack_changes_nothing(provider: StandIn, tmp_path: Path) -> None:
    remote = tmp_path / "shared-remote"
    a = standard(tmp_path / "a")
    ok_here(*BUILD, cwd=a.root)
    ok_here("push", str(remote), cwd=a.root)
    pack = next((remote / "packs").glob("*.pack"))
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    refused = claw("pull", str(remote), cwd=b.root)
    assert refused.returncode in (2, 3) and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    if (b.root / "store").exists():  # (else it held nothing: removed; kept with a pack downloaded whole, to resume)
        counted = ok_here("query", "select count(*) as n from runs", "--format", "json", cwd=b.root)
        assert json.loads(counted) == [{"n": 0}]


def test_a_pull_from_a_bad_url_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    refused = claw("pull", "ftp://host/path", cwd=tmp_path)
    assert refused.returncode == 2 and "unknown scheme 'ftp'" in refused.stderr
    assert list(tmp_path.iterdir()) == []


def _blocks(root: Path) -> int:
    """Disk used under `root` (blocks allocated, as `du -s -B1` counts)."""
    return sum(path.lstat().st_blocks * 512 for path in root.rglob("*"))


def test_a_team_moves_to_a_fresh_remote_to_leave_what_it_retired_behind(provider: StandIn, tmp_path: Path) -> None:
    # A remote only grows: every push adds packs, and superseded runs and retired campaigns stay on it.
    # A store that gc cleaned, published at a fresh prefix the team then switches to, leaves them
    # behind (docs/remote.md, "Reclaiming space on a remote"); nobody pays again.
    old, fresh = tmp_path / "old-remote", tmp_path / "fresh-remote"
    a = standard(tmp_path / "a")
    a.suite("other", ["m9"])
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    for ws in (a, b):
        ok_here("remote", "add", "team", str(old), cwd=ws.root)
    ok_here(*BUILD, cwd=a.root)
    ok_here("build", "--suite", "other", "--run-profile", "rp", cwd=a.root)
    edit_alpha(a)
    ok_here(*BUILD, cwd=a.root)  # alpha's first runs are superseded
    ok_here("push", "team", cwd=a.root)
    edit_alpha(b)
    ok_here("pull", "team", cwd=b.root)
    paid = len(provider.requests)

    ok_here("refs", "--delete", "campaigns/other__rp__none", "--delete", "remotes/team/campaigns/other__rp__none",
            cwd=a.root)
    ok_here("gc", "--grace", "0", cwd=a.root)
    for ws in (a, b):
        ok_here("remote", "add", "team", str(fresh), cwd=ws.root)
    ok("push", "team", cwd=a.root)
    assert _blocks(fresh) < 0.8 * _blocks(old)
    assert sorted(p.name for p in (fresh / "refs" / "campaigns").iterdir()) == ["main__rp__none"]

    ok("pull", "team", cwd=b.root)
    ok(*BUILD, cwd=b.root)
    assert len(provider.requests) == paid
    b.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    ok(*BUILD, cwd=b.root)
    assert len(provider.requests) == paid + 2  # beta's runs, one per model
    ok("push", "team", "--suite", "main", "--run-profile", "rp", cwd=b.root)  # its own campaign only
    ok("pull", "team", cwd=a.root)
    a.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    ok(*BUILD, cwd=a.root)
    assert len(provider.requests) == paid + 2
    assert sorted(p.name for p in (fresh / "refs" / "campaigns").iterdir()) == ["main__rp__none"]
    ok_here("fsck", cwd=a.root)
    ok_here("fsck", cwd=b.root)


@pytest.mark.parametrize("remote_url", ["s3"], indirect=True)  # (the directory backend: conftest.py)
@pytest.mark.parametrize("how", ["pull, then build", "build --remote"])
def test_a_colleagues_results_replace_the_runs_that_failed_here(provider: StandIn, remote_url: str,
                                                                tmp_path: Path, how: str) -> None:
    # A's provider failed (recorded as provider_error, which a build runs again); B's did not and B pushed.
    # A's next build reuses B's results instead of paying for every run a second time.
    a = standard(tmp_path / "a")
    a.run_profile(defaults={"retries": 0})  # (A's failures are final at once: no backoff waited out between attempts)
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    provider.set_default({"status": 500, "error": "upstream down"})
    assert claw_here(*BUILD, cwd=a.root)[0] == 1
    provider.set_default({"content": "fine"})
    ok_here(*BUILD, cwd=b.root)
    ok_here("push", remote_url, cwd=b.root)
    paid = len(provider.requests)
    if how == "build --remote":
        ok_here("remote", "add", "team", remote_url, cwd=a.root)
        built = ok(*BUILD, "--remote", "team", cwd=a.root)
    else:
        ok("pull", remote_url, cwd=a.root)
        built = ok(*BUILD, cwd=a.root)
    assert "0 executed" in built
    assert len(provider.requests) == paid, "A paid again for runs B had pushed"
    ok_here("fsck", cwd=a.root)


@pytest.mark.parametrize("remote_url", ["dir"], indirect=True)
def test_a_pulled_store_collects_a_colleagues_batch_and_never_sends_it_again(provider: StandIn, remote_url: str,
                                                                             tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    a = standard(tmp_path / "a")
    eval_profile(a, repetitions=1)
    provider.script(JUDGE, judge_reply(7))
    provider.batch_settings(delay=1.0)
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    ok_here("remote", "add", "team", remote_url, cwd=a.root)
    ok_here("remote", "add", "team", remote_url, cwd=b.root)
    scored = (*BUILD, "--evaluation-profile", "ev")
    ok_here(*scored, "--batch", cwd=a.root)  # returns at once: its 4 runs pending in a batch per model
    assert provider.batch_stats()["lines"] == 4
    ok_here("push", "team", cwd=a.root)
    ok("pull", "team", cwd=b.root)
    out = ok(*scored, "--batch", "--wait", "--output", "json", cwd=b.root)  # A's runs, then 4 judgements
    assert {r["score"] for r in json.loads(out)["rows"]} == {7.0}
    stats = provider.batch_stats()
    assert stats["lines"] == 8 and len(set(stats["custom_ids"])) == 8, "B sent again what A's batches stand for"
    assert provider.requests == []  # nothing one by one
    # B let A's batches go once collected; a pull of the same values brings them back no more (before session 77 each
    # pull did: "2 ref(s) moved" though nothing had, and the next command let them go again)
    again = ok("pull", "team", cwd=b.root)
    assert "0 ref(s) moved" in again, again
    refs = ok_here("refs", cwd=b.root).replace("remotes/team/batches/", "")
    assert "batches/" not in refs, "a collected batch came back"
    status = ok_here("batch", "status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                "--output", "json", cwd=b.root)
    assert json.loads(status)["pending"] == 0 and json.loads(status)["batches"] == []
    assert provider.batch_stats()["lines"] == 8
    ok_here("fsck", cwd=b.root)
    # A third colleague's fresh store pulls the remote: A's batches' refs (a push never deletes one) and B's records of
    # their lines. Its report asks no provider; it said "4 request(s) of campaign main__rp__ev are pending in provider
    # batches: their cost and scores are not in these figures yet", though every one was (session 77)
    ok_here("push", "team", cwd=b.root)
    c = Workspace(tmp_path / "c")
    shutil.copytree(a.configs, c.configs)
    ok("pull", remote_url, cwd=c.root)
    code, _, err = claw_here("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                             cwd=c.root)
    assert code == 0 and "pending in provider batches" not in err, err
    assert provider.batch_stats()["lines"] == 8 and provider.requests == []


@pytest.mark.parametrize("remote_url", ["dir"], indirect=True)
def test_batch_cancel_all_leaves_a_colleagues_pulled_batches_alone(provider: StandIn, remote_url: str,
                                                                  tmp_path: Path) -> None:
    """`claw batch cancel --all` in a store that pulled A's batches cancelled them at the provider (with a team's shared
    key): A's store found them cancelled and released, and A's next build sent them again one by one, at full price
    (session 77). `--all` is this store's builds' batches; a colleague's is cancelled by its name."""
    a = standard(tmp_path / "a")
    eval_profile(a, repetitions=1)
    provider.script(JUDGE, judge_reply(7))
    provider.batch_settings(delay=60)
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    scored = (*BUILD, "--evaluation-profile", "ev")
    ok_here(*scored, "--batch", cwd=a.root)
    ok_here("push", remote_url, cwd=a.root)
    ok("pull", remote_url, cwd=b.root)
    code, out, err = claw_here("batch", "cancel", "--all", cwd=b.root)
    assert code == 0 and "0 batch(es) cancelled" in out, out + err
    assert "2 batch(es) submitted by another store's builds (pulled) left alone" in err, err
    assert provider.batch_stats()["cancelled"] == 0
    code, out, err = claw_here("batch", "status", "--suite", "main", "--run-profile", "rp",
                               "--evaluation-profile", "ev", "--output", "json", cwd=a.root)
    assert code == 1 and json.loads(out)["pending"] == 4, out + err  # (exit 1: still pending, not cancelled)
