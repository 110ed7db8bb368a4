"""Writers beside a `claw gc --grace 0` (session 77): each writer, a real `claw` process, is stopped between what it
wrote or read and the ref that names it (tests/gc/proc_writer_held.py); a real `claw gc --grace 0` runs to its end
meanwhile; the writer goes on. What the user then sees: `claw fsck` clean, and the state written served without a
request to the stand-in. The writer and the gc are real processes; the checks after them (`fsck`, `refs`, the second
push) run in the test's process (tests/support/prepared.py), the same commands without a child's start each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.store.store import Store
from clawstore.testing.standin import StandIn
from tests.faults.helpers import head_nodes
from tests.hostile.attack import run_claw
from tests.pae.paefiles import write_outputs
from tests.pae.test_import_pae import SETTINGS, SYSTEM, pae_runs
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.prepared import run_here
from tests.support.storefiles import age, age_packs, lose_object
from tests.support.workspace import Workspace, many_cases, standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
PROC = Path(__file__).with_name("proc_writer_held.py")


def held(cwd: Path, hold_at: str, *command: str) -> subprocess.Popen[str]:
    """`claw COMMAND` started and stopped before its first call of `hold_at` (it said so)."""
    writer = subprocess.Popen([sys.executable, str(PROC), *command], cwd=cwd, env={**os.environ, "HOLD_AT": hold_at},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert writer.stderr is not None
    said = writer.stderr.readline()
    if said != "held\n":
        out, err = writer.communicate(timeout=60)
        raise AssertionError(f"{command} never reached {hold_at}: exit {writer.returncode}\n{said}{err}{out}")
    return writer


def release(writer: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = writer.communicate("go\n", timeout=120)
    return subprocess.CompletedProcess(writer.args, writer.returncode, out, err)


def gc_now(cwd: Path, *options: str) -> None:
    gc = run_claw(cwd, "gc", "--grace", "0", *options)
    assert gc.code == 0, gc


def beside_gc(cwd: Path, hold_at: str, *command: str) -> subprocess.CompletedProcess[str]:
    """`claw COMMAND` held before its first call of `hold_at`, a whole `claw gc --grace 0` run meanwhile, then let go:
    how the command ended."""
    writer = held(cwd, hold_at, *command)
    try:
        gc_now(cwd)
    finally:
        done = release(writer)
    return done


def _edit(ws: Workspace, *prompts: str) -> None:
    ws.case("alpha", prompts[0])
    ws.case("beta", prompts[1])


def test_pin_beside_a_build_and_gc_pins_a_whole_head(tmp_path: Path, standin: StandIn,
                                                     env: dict[str, str]) -> None:  # noqa: F811
    """`claw pin` has read the campaign's head and is about to point pins/v1 at it when a build moves the campaign on
    and `claw gc --grace 0` runs. Before session 77 pin held no lease: gc deleted the head, and the pin failed (exit 3,
    "cannot set ref pins/v1: object blake3:… is not in the store"), the state it was asked to keep gone."""
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    writer = held(ws.root, "clawstore.store.store:Store.set_ref", "pin", "v1", *CAMPAIGN)
    try:
        _edit(ws, "What is 3 + 3?", "Name a shape.")
        assert run_here(ws.root, "build", *CAMPAIGN).code == 0
        gc_now(ws.root)
    finally:
        pinned = release(writer)
    assert pinned.returncode == 0, pinned.stderr
    assert "pins/v1 -> blake3:" in pinned.stdout, pinned.stdout
    fsck = run_here(ws.root, "fsck")
    assert fsck.code == 0, fsck
    _edit(ws, "What is 2 + 2?", "Name a colour.")  # (the pinned state's configs: standard()'s prompts)
    asked = len(standin.requests)
    rebuilt = run_here(ws.root, "build", *CAMPAIGN)
    assert rebuilt.code == 0, rebuilt
    assert len(standin.requests) == asked, standin.requests[asked:]


def test_archive_import_beside_gc_writes_the_configs(tmp_path: Path, standin: StandIn,
                                                     env: dict[str, str]) -> None:  # noqa: F811
    """`claw archive import --configs-to DIR` into a workspace holding only its store has published the archive and is
    about to check its configs out when `claw gc --grace 0` runs there. Before session 77 its lease had ended with the
    publishing, and nothing names the config tree: gc deleted it, and the import failed after all."""
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "archive", "export", *CAMPAIGN, "-o", str(tmp_path / "main.claw")).code == 0
    there = tmp_path / "there"
    Store(there / "store").close()  # (a fresh workspace: only its store)
    store = ("--store", str(there / "store"))
    writer = held(tmp_path, "clawstore.project.keeping:write_configs",
                  "archive", "import", str(tmp_path / "main.claw"), "--configs-to", str(there), *store)
    try:
        gc_now(tmp_path, *store)
    finally:
        imported = release(writer)
    assert imported.returncode == 0, imported.stderr
    assert f"configs written to {there / 'configs'}" in imported.stdout, imported.stdout
    fsck = run_here(tmp_path, "fsck", *store)
    assert fsck.code == 0, fsck
    asked = len(standin.requests)
    rebuilt = run_here(there, "build", *CAMPAIGN, *store)
    assert rebuilt.code == 0, rebuilt
    assert "0 executed" in rebuilt.stdout, rebuilt.stdout
    assert len(standin.requests) == asked, standin.requests[asked:]


def test_pull_beside_gc_brings_a_deleted_head_back_whole(tmp_path: Path, standin: StandIn,
                                                         env: dict[str, str]) -> None:  # noqa: F811
    """A campaign retired here (`claw refs --delete` of its head and tracking ref, docs/gc-and-archives.md) and pulled
    back an hour later: every object is still in the store, so the pull fetches nothing, and `claw gc --grace 0` runs
    before it moves the ref. Before session 77 the pull's lease kept only the action cache and young packs: gc deleted
    the head and its parts, and the pull kept the ref away ("remote head … was not in any pack")."""
    ws = standard(tmp_path / "ws")
    head = "campaigns/main__rp__none"
    assert run_here(ws.root, "remote", "add", "team", str(tmp_path / "remote")).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "push", "team").code == 0
    assert run_here(ws.root, "refs", "--delete", head, "--delete", f"remotes/team/{head}").code == 0
    with Store(Path(env["CLAW_STORE"])) as store:
        age_packs(store, 3600)  # (written an hour ago: older than a running pull's lease window)
    pulled = beside_gc(ws.root, "clawstore.remote.pull:_pull_ref", "pull", "team")
    assert pulled.returncode == 0, pulled.stderr
    refs = run_here(ws.root, "refs")
    assert head in refs.stdout, pulled.stdout + pulled.stderr + refs.stdout
    fsck = run_here(ws.root, "fsck")
    assert fsck.code == 0, fsck
    asked = len(standin.requests)
    rebuilt = run_here(ws.root, "build", *CAMPAIGN)
    assert rebuilt.code == 0, rebuilt
    assert len(standin.requests) == asked, standin.requests[asked:]


def test_pull_beside_gc_keeps_a_pack_an_interrupted_pull_downloaded(tmp_path: Path, standin: StandIn,
                                                                    env: dict[str, str]) -> None:  # noqa: F811
    """A pull SIGKILLed after downloading a pack keeps it for the next pull (remote/downloads.py), which moves it in
    whole (1 MiB or more) an hour later, and `claw gc --grace 0` runs before that pull moves the ref. Before session 77
    the pack kept its download's mtime, older than the pull's lease window: gc deleted it, head and all, and the pull
    kept the ref away ("remote head … was not in any pack")."""
    ws = standard(tmp_path / "ws")
    (ws.configs / "cases" / "alpha" / "data.csv").write_text(
        "".join(f"{n},{os.urandom(24).hex()}\n" for n in range(48_000)))  # (~2.6 MB: a pack over 1 MiB)
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(attachments=["data.csv"]))
    remote = str(tmp_path / "remote")
    assert run_here(ws.root, "remote", "add", "team", remote).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "push", "team").code == 0
    there = tmp_path / "there"
    there.mkdir()
    os.environ["CLAW_STORE"] = str(there / "store")  # (env's monkeypatch restores it)
    assert run_here(there, "remote", "add", "team", remote).code == 0
    first = held(there, "clawstore.store.services.transfer:Incoming.check", "pull", "team")  # (downloaded, kept)
    first.kill()
    first.communicate(timeout=60)
    kept = list((there / "store" / "remotes" / "team" / "incoming").glob("*.pack"))
    assert kept and max(path.stat().st_size for path in kept) >= 1 << 20, kept
    age(kept, 3600)  # (the pull run again an hour later)
    pulled = beside_gc(there, "clawstore.remote.pull:_pull_ref", "pull", "team")
    assert pulled.returncode == 0, pulled.stderr
    assert "campaigns/main__rp__none" in run_here(there, "refs").stdout, pulled.stdout + pulled.stderr
    fsck = run_here(there, "fsck")
    assert fsck.code == 0, fsck
    asked = len(standin.requests)
    rebuilt = run_here(ws.root, "build", *CAMPAIGN)  # (the same configs, built with the store pulled into)
    assert rebuilt.code == 0, rebuilt
    assert len(standin.requests) == asked, standin.requests[asked:]


def test_import_pae_beside_gc_keeps_what_pae_paid_for(tmp_path: Path, standin: StandIn,
                                                      env: dict[str, str]) -> None:  # noqa: F811
    """`claw import-pae` has stored every run and judgement and is about to name them from `imports/pae-…` when `claw
    gc --grace 0` runs. Safe before session 77 too (its lease, pae/importer.py, spans its first write to that ref:
    gc keeps the action cache's closure and young packs meanwhile); this proves it (without that lease: 16
    requests)."""
    ws = standard(tmp_path / "ws")
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(5))
    write_outputs(ws.root, pae_runs(), SETTINGS, SYSTEM)
    imported = beside_gc(ws.root, "clawstore.pae.importer:keep_imported", "import-pae", str(ws.root))
    assert imported.returncode == 0, imported.stderr
    assert run_here(ws.root, "fsck").code == 0
    rebuilt = run_here(ws.root, "build", *CAMPAIGN, "--evaluation-profile", "ev")
    assert rebuilt.code == 0, rebuilt
    assert standin.requests == []


def test_push_beside_a_build_and_gc_sends_and_remembers_a_whole_head(tmp_path: Path, standin: StandIn,
                                                                     env: dict[str, str]) -> None:  # noqa: F811
    """`claw push` has read the campaign's head (built an hour ago, in a pack of its own: the second build's) and sent
    it, and is about to move the remote's ref when a build moves the campaign on here and `claw gc --grace 0` runs.
    Before session 77 its lease kept only the action cache and young packs: gc deleted the head it was pushing."""
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "remote", "add", "team", str(tmp_path / "remote")).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    ws.case("alpha", "What is 3 + 3?")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0  # (the head in a pack with alpha's new runs alone)
    with Store(Path(env["CLAW_STORE"])) as store:
        age_packs(store, 3600)  # (built an hour ago: older than a running push's lease window)
    writer = held(ws.root, "clawstore.remote.push:_move_refs", "push", "team")
    try:
        ws.case("alpha", "What is 4 + 4?")  # (beta's runs reused: nothing of the pushed head's pack put again)
        assert run_here(ws.root, "build", *CAMPAIGN).code == 0
        gc_now(ws.root)
    finally:
        pushed = release(writer)
    assert pushed.returncode == 0, pushed.stderr
    fsck = run_here(ws.root, "fsck")
    assert fsck.code == 0, fsck
    again = run_here(ws.root, "push", "team")  # (this store's newer head: sent, nothing refused)
    assert again.code == 0, again


def _retired_and_built_on(ws: Workspace, tmp_path: Path, head: str,
                          colleague_home: Path | None = None) -> tuple[str, str]:
    """The campaign built here, pushed to `team` and retired here (`claw refs --delete`, an hour ago); a colleague (a
    store of their own; with `colleague_home`, a signing key of their own, trusting this user's) pulled it, changed one
    case, built and pushed: their head, which this store does not hold, though most of its parts are here, and their
    key."""
    remote, here, home = str(tmp_path / "remote"), os.environ["CLAW_STORE"], os.environ["XDG_CONFIG_HOME"]
    assert run_here(ws.root, "remote", "add", "team", remote).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "push", "team").code == 0
    assert run_here(ws.root, "refs", "--delete", head, "--delete", f"remotes/team/{head}").code == 0
    mine = run_here(ws.root, "key", "show").stdout.strip()
    os.environ["CLAW_STORE"] = str(tmp_path / "colleague")  # (both restored by the env fixtures' monkeypatch)
    if colleague_home is not None:
        os.environ["XDG_CONFIG_HOME"] = str(colleague_home)
        assert run_here(ws.root, "trust", "add", mine).code == 0
    assert run_here(ws.root, "remote", "add", "team", remote).code == 0
    assert run_here(ws.root, "pull", "team").code == 0
    ws.case("c000", "Question 1000?")  # (the other cases' runs and the head's parts holding them as they were)
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "push", "team").code == 0
    theirs_key = run_here(ws.root, "key", "show").stdout.strip()
    with Store(tmp_path / "colleague") as colleague:
        theirs = colleague.get_ref(head)
    os.environ["CLAW_STORE"], os.environ["XDG_CONFIG_HOME"] = here, home
    with Store(Path(here)) as store:
        assert theirs is not None and not store.has(theirs)
        age_packs(store, 3600)  # (retired an hour ago: older than a running pull's lease window)
    return theirs, theirs_key


@pytest.mark.parametrize("hold_at", ["_Pull.add_entries", "_pull_ref"])
def test_pull_beside_gc_keeps_what_a_new_head_shares_with_a_retired_one(tmp_path: Path, standin: StandIn,
                                                                      env: dict[str, str],  # noqa: F811
                                                                      hold_at: str) -> None:
    """A campaign retired here (`claw refs --delete`, an hour ago) that a colleague built on: the remote's head is not
    in this store, but most of its parts are, unrooted, in packs older than any lease window. The pull fetches only
    what this store lacks (the head, the parts holding the changed case) and `claw gc --grace 0` runs once those are
    in: before the pull leases the head (add_entries), or before it moves the ref (_pull_ref). Before session 77 gc
    deleted the shared parts (the action cache's closure, which gc keeps while a pull runs, holds the records, not the
    head's parts): the pull moved the ref to a head `claw fsck` found incomplete (`names part …, which is missing`)."""
    ws = many_cases(tmp_path / "ws", 60)  # (a head of several parts: those the colleague's build left as they were)
    head = "campaigns/main__rp__none"
    theirs, _ = _retired_and_built_on(ws, tmp_path, head)
    pulled = beside_gc(ws.root, f"clawstore.remote.pull:{hold_at}", "pull", "team")
    assert pulled.returncode == 0, pulled.stderr
    assert f"{head}\t{theirs}" in run_here(ws.root, "refs").stdout, pulled.stdout + pulled.stderr
    fsck = run_here(ws.root, "fsck")
    assert fsck.code == 0, fsck
    asked = len(standin.requests)
    rebuilt = run_here(ws.root, "build", *CAMPAIGN)  # (the colleague's configs: its head, served whole)
    assert rebuilt.code == 0, rebuilt
    assert len(standin.requests) == asked, standin.requests[asked:]


def test_untrusted_pull_beside_gc_keeps_apart_a_whole_head(tmp_path: Path, standin: StandIn,
                                                          env: dict[str, str]) -> None:  # noqa: F811
    """As above, the colleague's key not trusted here: `claw pull --untrusted` keeps their head apart (`untrusted/…`,
    a gc root) and `claw gc --grace 0` runs before it does. Before session 77 gc deleted the head's shared parts: once
    the colleague's key was trusted, the build moved the campaign's ref to a head `claw fsck` found incomplete."""
    ws = many_cases(tmp_path / "ws", 60)
    head = "campaigns/main__rp__none"
    theirs, signer = _retired_and_built_on(ws, tmp_path, head, colleague_home=tmp_path / "colleague-home")
    pulled = beside_gc(ws.root, "clawstore.remote.pull:_Pull.add_entries", "pull", "team", "--untrusted")
    assert pulled.returncode == 0 and "kept apart" in pulled.stdout + pulled.stderr, pulled
    assert run_here(ws.root, "fsck").code == 0
    assert run_here(ws.root, "trust", "add", signer).code == 0
    asked = len(standin.requests)
    rebuilt = run_here(ws.root, "build", *CAMPAIGN)  # (moves the kept-apart head in: the colleague's configs)
    assert rebuilt.code == 0, rebuilt
    assert len(standin.requests) == asked, standin.requests[asked:]
    assert f"{head}\t{theirs}" in run_here(ws.root, "refs").stdout
    fsck = run_here(ws.root, "fsck")
    assert fsck.code == 0, fsck


def test_fsck_repair_beside_gc_names_a_whole_head(tmp_path: Path, standin: StandIn,
                                                  env: dict[str, str]) -> None:  # noqa: F811
    """`claw fsck --repair` has written the campaign's head again without the node whose output is gone and is about
    to point the campaign's ref at it when `claw gc --grace 0` runs. Before session 77 it held no lease: nothing named
    the new head, written before gc began, and gc deleted it; the repair failed (`cannot set ref campaigns/…: object
    … is not in the store`)."""
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    with Store(Path(env["CLAW_STORE"])) as store:
        run = next(node for node in head_nodes(store, "main__rp__none") if node["kind"] == "run")
        lose_object(store, store.get_json(run["record"])["outputs"]["artifact"])
    repaired = beside_gc(ws.root, "clawstore.store.store:Store.set_ref", "fsck", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "1 node(s) whose record or outputs are gone no longer name them" in repaired.stdout, repaired.stdout
    fsck = run_here(ws.root, "fsck")
    assert fsck.code == 0, fsck
    asked = len(standin.requests)
    rebuilt = run_here(ws.root, "build", *CAMPAIGN)
    assert rebuilt.code == 0, rebuilt
    assert len(standin.requests) == asked + 1, standin.requests[asked:]  # (the run repaired away: that one alone)
