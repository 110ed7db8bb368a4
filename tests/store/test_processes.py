"""Real processes: SIGKILLed writers, concurrent writers, ref CAS across processes, leases, locks."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.services.fsck import fsck
from tests.store.helpers import script
from tests.support.reaped import reaped


def _lines_of_killed(procs: list[subprocess.Popen[bytes]], delays: list[float]) -> list[list[str]]:
    """Once every one of `procs` is ready, SIGKILL each `delays[i]` seconds after (all writing meanwhile, each
    killed at its own moment: the same kills as one process after another, without each waiting out those before
    it); what each printed."""
    with reaped(*procs):  # (they write until killed)
        for proc in procs:
            assert proc.stdout.readline() == b"ready\n", proc.stderr.read()
        began = time.monotonic()
        for at in sorted(range(len(procs)), key=delays.__getitem__):
            time.sleep(max(0.0, began + delays[at] - time.monotonic()))
            procs[at].send_signal(signal.SIGKILL)
        printed = []
        for proc in procs:
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == -signal.SIGKILL, err.decode()
            printed.append(out.decode().splitlines())
    return printed


def test_sigkilled_writers_never_leave_partial_objects(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    Store(store_dir)
    rnd = random.Random(1234)
    reported_objects: set[str] = set()
    reported_actions: dict[str, str] = {}
    kills = 0
    for round_number in range(6):  # 4 writers per round, all killed: 24 kills
        procs = [script("proc_writer.py", store_dir, round_number * 10 + n) for n in range(4)]
        for lines in _lines_of_killed(procs, [rnd.uniform(0.0, 0.5) for _ in procs]):
            for line in lines:
                parts = line.split()
                # the last line may be cut by the kill: only whole lines count as reported
                if parts and parts[0] == "obj" and len(parts) == 2 and len(parts[1]) == 71:
                    reported_objects.add(parts[1])
                elif parts and parts[0] == "action" and len(parts) == 3 and len(parts[2]) == 71:
                    reported_actions[parts[1]] = parts[2]
            kills += 1
    assert kills >= 20
    store = Store(store_dir)
    report = fsck(store)
    assert report.clean, report.problems
    assert reported_objects, "the writers never got to report anything"
    print(f"{kills} kills; {len(reported_objects)} objects and {len(reported_actions)} actions reported; "
          f"{report.objects} objects, {report.actions} actions in the store; {report.temp_files} temp files left")
    for oid in reported_objects:
        store.get_bytes(oid)  # verified read: raises if not intact
    for key, record in reported_actions.items():
        assert store.get_action_record_id(key) == record
    # leftovers of the killed writers are stale temp files; repair removes them
    repaired = fsck(store, repair=True)
    assert repaired.clean and fsck(store).stale_temp_files == 0


def test_concurrent_writers_with_overlapping_objects(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    Store(store_dir)
    procs = [script("proc_putter.py", store_dir, n) for n in range(4)]
    ids: dict[str, set[str]] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        for line in out.decode().splitlines():
            number, oid = line.split()
            ids.setdefault(number, set()).add(oid)
    assert len(ids) == 60 and all(len(found) == 1 for found in ids.values())  # same bytes, same id
    store = Store(store_dir)
    assert set(store.iter_objects()) == {next(iter(found)) for found in ids.values()}
    report = fsck(store)
    assert report.clean and report.objects == 60 and report.temp_files == 0


def test_ref_cas_across_processes(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    Store(store_dir)
    procs = [script("proc_counter.py", store_dir, 20) for _ in range(4)]
    conflicts = 0
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        conflicts += int(out)
    store = Store(store_dir)
    assert store.get_json(store.get_ref("counter")) == {"n": 80}
    print(f"CAS conflicts retried: {conflicts}")


def test_leases_and_exclusive_locks_between_processes(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    holder = script("proc_holder.py", store.root, "build", "gc")
    try:
        assert holder.stdout.readline() == b"held\n"
        leases = store.list_leases()
        assert [(lease.pid, lease.purpose, lease.alive) for lease in leases] == [(holder.pid, "build", True)]
        with pytest.raises(StoreError, match="lock 'gc' is held"), store.exclusive("gc", timeout=0.2):
            pass
        with store.lease("query") as mine:  # our own lease is seen as alive too
            assert {(lease.purpose, lease.alive) for lease in store.list_leases()} == {
                ("build", True), ("query", True)}
            assert mine.path.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=30)
    # the killed holder's lease is left behind, but stale; its lock died with it
    assert [(lease.purpose, lease.alive) for lease in store.list_leases()] == [("build", False)]
    with store.exclusive("gc", timeout=5):
        pass
    report = fsck(store, repair=True)
    assert report.stale_leases == 1 and store.list_leases() == []
    assert os.listdir(store.root / "leases") == []
