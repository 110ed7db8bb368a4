"""Cache poisoning: an action-cache entry moved to another key is found by fsck and refused by pull.

A key is the id of its node's input document, so an entry can be checked against the store alone
(clawstore/store/actions.py entry_problem); these attacks use real files and real `claw` processes (the builds
and the push that only prepare a store, and the last fscks that read what an attack left, run in the test's own
process: tests/support/prepared.py).
"""

from __future__ import annotations

import time
from pathlib import Path

from clawstore.store import Store
from clawstore.store.actions import set_entries
from clawstore.store.core.ids import PREFIX
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.faults.test_hostile_archives import snapshot
from tests.support.forged import swap_two_entries
from tests.support.prepared import ok_here
from tests.support.workspace import SECRET, Workspace, standard

BUILD = ("build", "--suite", "main", "--run-profile", "rp")


def _built(root: Path, standin: StandIn, monkeypatch) -> Workspace:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    ws = standard(root)
    ok_here(*BUILD, cwd=ws.root)
    return ws


def test_fsck_names_swapped_entries_and_repair_makes_the_build_redo_them(
        tmp_path: Path, standin: StandIn, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    ws = _built(tmp_path / "ws", standin, monkeypatch)
    store = Store(ws.root / "store")
    entries = dict(store.iter_actions())
    first, second = sorted(entries)[:2]
    now = time.time_ns()

    def raw(oid: str) -> bytes:
        return bytes.fromhex(oid[len(PREFIX):])

    set_entries(store, {raw(first): (raw(entries[second]), now), raw(second): (raw(entries[first]), now)})
    checked = claw("fsck", cwd=ws.root)
    assert checked.returncode == 1
    for key in (first, second):
        assert f"action-cache entry {key}: its record is for another key" in checked.stdout + checked.stderr
    assert claw("fsck", "--repair", cwd=ws.root).returncode in (0, 1)
    assert claw("fsck", cwd=ws.root).returncode == 0
    sent = len(standin.requests)
    rebuilt = claw(*BUILD, cwd=ws.root)
    assert rebuilt.returncode == 0, rebuilt.stderr
    # the campaign head still names the right records: at most the two nodes are run again
    assert len(standin.requests) - sent <= 2
    store = Store(ws.root / "store")
    for key in (first, second):
        assert store.get_action_record_id(key) in (None, entries[key])  # never the swapped record
    ok_here("fsck", cwd=ws.root)


def test_a_pull_of_a_re_signed_listing_with_swapped_entries_is_refused(
        tmp_path: Path, standin: StandIn, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    a = _built(tmp_path / "a", standin, monkeypatch)
    remote = tmp_path / "remote"
    ok_here("push", str(remote), cwd=a.root)
    # The attacker can write to the shared folder: each listing with entries gets them swapped and is
    # signed again, even by a key the puller trusts: swapped entries must not get in.
    assert len(swap_two_entries(remote)) >= 2
    b = _built(tmp_path / "b", standin, monkeypatch)  # a colleague's store with results of its own
    # remotes/ only caches the listings the remote shows (whatever it holds); the rest must not move
    before = {k: v for k, v in snapshot(b.root / "store").items() if not k.startswith("remotes/")}
    pulled = claw("pull", str(remote), cwd=b.root)
    assert pulled.returncode == 2, pulled.stderr
    assert pulled.stderr.count("\n") == 1 and "its record is for another key" in pulled.stderr
    after = {k: v for k, v in snapshot(b.root / "store").items() if not k.startswith("remotes/")}
    assert after == before, sorted(set(after.items()) ^ set(before.items()))[:6]
    ok_here("fsck", cwd=b.root)
