"""What a killed gc's copies look like to the commands that only look: `claw fsck` counts the packs no index names
(their number, their bytes, who removes them), and `claw gc --dry-run` says what the real gc will do with the copies
`locks/gc.copies` lists — but counts none while a gc holds its lock (its copies are under way, not a killed one's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.cli.common import size_text
from clawstore.errors import StoreError
from clawstore.store.core.packfile import KIND_OBJECT, PackWriter, iter_pack_ids, pack_path
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import GC_LOCK, collect
from tests.gc.helpers import PROC_GC_HELD, killed_gc, store_with_garbage
from tests.store.helpers import REPO, claw, env


def _sizes(root: Path, packs: set[str]) -> dict[str, int]:
    return {pack: pack_path(root / "packs", pack).stat().st_size for pack in packs}


def test_fsck_counts_a_killed_gcs_copies_and_gc_removes_them(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = store_with_garbage(root)
    copies = killed_gc(root)
    assert len(copies) > 1
    report = fsck(store)
    assert report.clean and report.unindexed_packs == _sizes(root, copies) and report.unindexed_copies == len(copies)
    done = claw("fsck", "--store", root)
    assert done.returncode == 0, done.stderr
    note = (f"note: {len(copies)} pack(s), {size_text(sum(_sizes(root, copies).values()))}, hold nothing the index "
            f"names: {len(copies)} a killed gc's copies (the next claw gc removes them)")
    assert note in done.stdout.decode().splitlines()

    collect(store)  # (the default grace period: the copies are minutes old)
    assert not copies & set(iter_pack_ids(root / "packs"))
    report = fsck(store)
    assert report.clean and report.unindexed_packs == {}
    assert "hold nothing the index names" not in claw("fsck", "--store", root).stdout.decode()


def test_fsck_counts_an_unlisted_pack_but_not_one_the_index_names_or_a_live_writers(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = store_with_garbage(root)
    copies = killed_gc(root, "swapped")  # (the index swapped in names them)
    assert copies and not copies & set(fsck(store).unindexed_packs)
    collect(store)  # (the swap finished: the old packs gone)
    assert fsck(store).unindexed_packs == {}
    # a sealed pack two hours old that no index here names, as a killed writer leaves it
    other = tmp_path / "other" / "packs"
    store_with_garbage(other.parent)
    pack = max(iter_pack_ids(other), key=lambda p: pack_path(other, p).stat().st_size)
    pack_path(root / "packs", pack).parent.mkdir(parents=True, exist_ok=True)
    pack_path(other, pack).rename(pack_path(root / "packs", pack))
    writing = PackWriter(root / "packs")  # a live writer's pack, not yet named: not counted
    try:
        writing.append(KIND_OBJECT, b"\x01" * 32, [b"being written" * 100])
        report = fsck(store)
        assert report.unindexed_packs == _sizes(root, {pack}) and report.unindexed_copies == 0
    finally:
        writing.close()
    done = claw("fsck", "--store", root)
    assert ("left by a killed writer (claw gc adopts what a torn one finished and removes the rest once older than "
            "its --grace period)") in done.stdout.decode()
    collect(store)  # the old one removed (older than the grace period); the torn one sealed, its junk refused
    assert pack not in set(iter_pack_ids(root / "packs")) and set(fsck(store).unindexed_packs) == {writing.pack_id}


def test_a_dry_run_says_what_gc_does_with_a_killed_gcs_copies(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = store_with_garbage(root)
    copies = killed_gc(root)
    with store.lease("build b1"):  # while a build runs, both keep them
        assert collect(store, dry_run=True).copies_deleted == 0
    with store.exclusive(GC_LOCK):  # a gc at work: its list is not a killed one's
        beside = collect(store, dry_run=True)
    assert beside.copies_deleted == 0 and beside.packs_deleted == 0
    dry = collect(store, dry_run=True)
    shown = json.loads(claw("gc", "--dry-run", "--json", "--store", root).stdout)
    real = collect(store)
    assert dry.copies_deleted == real.copies_deleted == len(copies) == shown["killed_gc_copies_deleted"]
    assert dry.packs_deleted == real.packs_deleted == shown["packs_deleted"] >= len(copies)
    assert not copies & set(iter_pack_ids(root / "packs"))


_LOOK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # (locks.held_now's look, caught between its two calls)
print("looking", flush=True)
time.sleep(0.2)
"""


def test_a_gc_starting_while_a_dry_run_looks_at_its_lock_runs(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = store_with_garbage(root)
    lock = root / "locks" / f"{GC_LOCK}.lock"
    with store.exclusive(GC_LOCK):
        pass  # (the lock file, as any gc leaves it)
    look = subprocess.Popen([sys.executable, "-c", _LOOK, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert look.stdout is not None and look.stdout.readline() == "looking\n"
        assert look.poll() is None
        assert collect(store, grace_s=0).packs_rewritten  # (no gc runs: the look is waited out, not taken for one)
    finally:
        look.wait(timeout=30)
    with store.exclusive(GC_LOCK), pytest.raises(StoreError, match="busy"):
        collect(store, grace_s=0)  # (a gc that holds it still turns a second away)


def test_fsck_beside_a_gc_at_work_does_not_count_its_copies(tmp_path: Path) -> None:
    # a gc stopped (alive, its lock held) with its copies sealed and no index naming them yet: they are its work, not
    # a killed gc's lost disk; once it is killed they are
    root = tmp_path / "store"
    store = store_with_garbage(root)
    before = set(iter_pack_ids(root / "packs"))
    gc = subprocess.Popen([sys.executable, str(PROC_GC_HELD), "copied"], cwd=REPO,
                          env={**env(), "CLAW_STORE": str(root)},
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert gc.stdout is not None and gc.stdout.readline() == b"at copied\n"
        copies = set(iter_pack_ids(root / "packs")) - before
        assert len(copies) > 1
        report = fsck(store)
        assert report.unindexed_packs == {} and report.unindexed_copies == 0
    finally:
        gc.kill()
        gc.communicate(timeout=60)
    report = fsck(store)
    assert report.unindexed_packs == _sizes(root, copies) and report.unindexed_copies == len(copies)
