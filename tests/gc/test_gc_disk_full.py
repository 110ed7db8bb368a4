"""gc where the store's disk will not take its plan's temporary files (full, or mounted read-only): a dry run still
says what a gc would free, and a gc still plans, its rows held in memory (gc_kept._REFUSED); a gc the full disk stops
mid-copy says the room it needs and leaves the store, and its room, as they were; a disk failing under the plan
(EIO) stops gc in one line saying where, nothing deleted."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.services import gc, gc_kept
from clawstore.store.services.gc_kept import SPILL_ROWS
from tests.faults.test_disk_full import _fill
from tests.gc.helpers import state, store_with_garbage
from tests.support.storefiles import age_packs
from tests.support.tmpfs import mounted_tmpfs

OBJECTS = 2 * SPILL_ROWS + 2000  # (half doomed: more doomed rows than gc holds before it writes them to its file)


@pytest.fixture
def store_fs(tmp_path: Path) -> Iterator[Path]:
    """A store (7.5 MiB) on a 16 MiB tmpfs, half its objects garbage two hours old (the other half pinned)."""
    with mounted_tmpfs(tmp_path / "small", "16m") as mount:
        store = Store(mount / "store")
        live = []
        with store.batch():
            for i in range(OBJECTS):
                digest = store.put_bytes(b"object %d" % i)
                if i % 2 == 0:
                    live.append(digest)
        store.set_ref("pins/live", store.put_json({"nodes": live}))
        store.runtime.close_writer()
        age_packs(store, 7200)
        yield mount


def _gc(mount: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clawstore.cli", "gc", *args], capture_output=True, text=True,
                          env={**os.environ, "CLAW_STORE": str(mount / "store")}, timeout=300)


def _said(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.split(" objects examined")[0] for line in done.stdout.splitlines()]  # (not its seconds)


def test_a_dry_run_on_a_full_disk_says_what_gc_would_free(store_fs: Path) -> None:
    with_room = _gc(store_fs, "--dry-run")
    assert with_room.returncode == 0, with_room.stderr
    assert f"would delete {OBJECTS // 2} objects" in with_room.stdout
    assert with_room.stderr == ""
    _fill(store_fs, leave=64 << 10)  # (the doomed rows alone take ~900 KiB)
    full = _gc(store_fs, "--dry-run")
    assert (full.returncode, full.stderr) == (0, _held_in_memory("No space left on device"))
    assert _said(full) == _said(with_room)
    assert os.listdir(store_fs / "store" / "tmp") == []


def _held_in_memory(why: str) -> str:
    """The one line gc says when tmp/ refused its plan's files: it held the plan in memory, so it took more."""
    return (f"claw: note: tmp/ refused gc's temporary files ({why}): gc held its plan in memory instead, about 52 "
            "bytes more an object (docs/gc-and-archives.md)\n")


def test_a_dry_run_on_a_store_mounted_read_only_says_what_gc_would_free(store_fs: Path) -> None:
    with_room = _gc(store_fs, "--dry-run")
    subprocess.run(["mount", "-o", "remount,ro", str(store_fs)], check=True)
    read_only = _gc(store_fs, "--dry-run")
    assert (read_only.returncode, read_only.stderr) == (0, _held_in_memory("Read-only file system"))
    assert _said(read_only) == _said(with_room)
    as_json = _gc(store_fs, "--dry-run", "--json")  # (the note once, on stderr: stdout is the one JSON object)
    assert (as_json.returncode, as_json.stderr) == (0, _held_in_memory("Read-only file system"))
    said = json.loads(as_json.stdout)
    assert said["objects_deleted"] == OBJECTS // 2 and "plan_in_memory" not in said


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.is_file() and path.parent.name != "locks"}


def test_a_gc_the_full_disk_stops_mid_copy_leaves_the_store_and_its_room_as_they_were(store_fs: Path) -> None:
    store_dir = store_fs / "store"
    filler = _fill(store_fs, leave=64 << 10)  # (room to plan, not to copy the kept half of the packs)
    before, room = _files(store_dir), os.statvfs(store_fs).f_bavail
    for _ in range(2):  # (and the next gc on that disk the same: not stuck behind the first one's copies)
        failed = _gc(store_fs)
        assert failed.returncode == 3 and re.fullmatch(  # (the room it needs: the kept half of 7.5 MiB of packs)
            r"claw: error: the disk is full: gc copies the kept objects of \d pack\(s\), about 3\.\d MiB, before it "
            r"deletes any; it deleted nothing\n", failed.stderr), failed.stderr
        assert _files(store_dir) == before
        assert os.statvfs(store_fs).f_bavail >= room - 1  # (a page: locks/gc.copies, naming copies now gone)
    filler.unlink()
    freed = _gc(store_fs)
    assert freed.returncode == 0, freed.stderr
    assert f"deleted {OBJECTS // 2} objects" in freed.stdout


def test_a_disk_failing_under_the_plan_stops_gc_saying_where_with_nothing_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_with_garbage(tmp_path / "store")
    before = state(store.root)

    def failing(fd: int, data: bytes, at: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(gc_kept, "SPILL_ROWS", 7)  # (its rows written to the file at once)
    monkeypatch.setattr(gc_kept, "_write_all", failing)
    with pytest.raises(StoreError, match=r"gc's plan could not be written to a temporary file in .*/tmp: Input/output "
                                         r"error$"):
        gc.collect(store)
    assert state(store.root) == before


def test_a_gc_whose_plan_tmp_refused_says_it_held_the_plan_in_memory_and_still_collects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real gc whose temporary files the disk refuses (here a quota, EDQUOT, on the plan's first write) plans in
    memory and collects as with room: its report says why, for the CLI's one line; with room it says nothing."""
    roomy = store_with_garbage(tmp_path / "roomy")
    refused_store = store_with_garbage(tmp_path / "refused")
    monkeypatch.setattr(gc_kept, "SPILL_ROWS", 7)  # (its rows written to the file at once)
    with_room = gc.collect(roomy, listed=False)
    assert with_room.plan_in_memory is None

    def over_quota(fd: int, data: bytes, at: int) -> None:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(gc_kept, "_write_all", over_quota)
    refused = gc.collect(refused_store, listed=False)
    assert refused.plan_in_memory == os.strerror(errno.EDQUOT)
    assert {**refused.to_json(), "seconds": 0} == {**with_room.to_json(), "seconds": 0}
    assert refused.objects_deleted == 300 and state(refused_store.root) == state(roomy.root)
