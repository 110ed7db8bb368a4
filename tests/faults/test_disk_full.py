"""A store on a real, tiny filesystem fills up mid-build: nothing new starts, paid answers are kept and
retried, and the build names exactly the answers it could not keep."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.tmpfs import mounted_tmpfs
from tests.support.workspace import Workspace

CASES = 30
RUNS = ("--suite", "main", "--run-profile", "rp")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: a real filesystem that runs out of space (each file takes at least a 4 KiB page:
    a run's objects, record and cache entry take ~16 KiB)."""
    with mounted_tmpfs(tmp_path / "small", "2m") as mount:
        yield mount


def _workspace(root: Path, standin: StandIn) -> Workspace:
    ws = Workspace(root)
    for index in range(CASES):
        ws.case(f"c{index:02d}", f"Question number {index}?")
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=4)
    rnd = random.Random(7)  # incompressible-ish answers of ~9 KB fill the store in a few runs
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(3000)]
    standin.set_default(text(" ".join(rnd.choice(words) for _ in range(1100)), latency=0.2))
    return ws


def _fill(mount: Path, leave: int = 100 << 10) -> Path:
    """A file taking all the free space of `mount` but `leave` bytes (room for a few runs)."""
    stat = os.statvfs(mount)
    filler = mount / "filler"
    filler.write_bytes(os.urandom(stat.f_bavail * stat.f_frsize - leave))
    return filler


def _stored_runs(store_dir: Path) -> int:
    store = Store(store_dir, create=False)
    return sum(1 for _, record in store.iter_actions() if record and store.get_json(record)["kind"] == "run")


def _run_requests(standin: StandIn) -> int:
    return sum(1 for r in standin.requests if r["body"]["model"] == "vendor/m1")


def _build(ws: Workspace, env: dict[str, str], retry_s: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "clawstore.cli", "build", *RUNS, "--output", "json"],
                            cwd=ws.root, env={**os.environ, **env, "CLAW_STORE_RETRY_SECONDS": retry_s},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_disk_full_stops_spending_and_names_every_lost_answer(
        small_fs: Path, standin: StandIn, env: dict[str, str], tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", standin)
    store_dir = small_fs / "store"
    Store(store_dir)
    _fill(small_fs)
    build = _build(ws, {**env, "CLAW_STORE": str(store_dir)}, "1")
    _, err = build.communicate(timeout=120)
    assert build.returncode == 3, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("claw: error: store ") and "No space left on device" in last and "Traceback" not in err
    sent, stored = _run_requests(standin), _stored_runs(store_dir)
    lost = last.count("run/m1/")
    assert sent < CASES  # spending stopped: far fewer requests than runs
    assert sent == stored + lost, (sent, stored, lost, last)  # every paid answer stored or named
    not_started = int(last.split(" node(s) not started")[0].rsplit(" ", 1)[1])
    assert not_started == CASES - sent, err


def test_answers_kept_in_memory_are_stored_when_space_returns(
        small_fs: Path, standin: StandIn, env: dict[str, str], tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", standin)
    store_dir = small_fs / "store"
    Store(store_dir)
    filler = _fill(small_fs)
    build = _build(ws, {**env, "CLAW_STORE": str(store_dir)}, "60")
    assert build.stderr is not None
    seen = []
    for line in build.stderr:
        seen.append(line)
        if "kept in memory and retried" in line:
            filler.unlink()  # space returns while the build waits
            break
    else:
        pytest.fail("the build never reported kept answers: " + "".join(seen))
    out, err = build.communicate(timeout=120)
    assert build.returncode == 3, err
    assert "no paid answer was lost" in err and "stored after all" in err, "".join(seen) + err
    sent, stored = _run_requests(standin), _stored_runs(store_dir)
    assert 0 < sent < CASES and sent == stored  # nothing paid was lost

    rest = _build(ws, {**env, "CLAW_STORE": str(store_dir)}, "1")  # room again: the next build finishes
    out, err = rest.communicate(timeout=120)
    assert rest.returncode == 0, err
    assert json.loads(out)["counts"]["reused"] == sent
    assert _run_requests(standin) == CASES == _stored_runs(store_dir)  # no answer paid twice


def test_a_last_commit_failing_does_not_hide_the_error_on_its_way_out(small_fs: Path) -> None:
    """A build that stops on an error (one line naming every lost answer) leaves its group-commit block
    with the head still pending; when the disk is full that last commit fails too, and must not replace
    the build's own error with a bare 'cannot write'. Without an error on its way, it is reported."""
    store = Store(small_fs / "store")
    with pytest.raises(RuntimeError, match="the build's own error"):
        with store.group_commit(window_s=3600):
            with store.batch():  # handed to the group: named when the block ends
                store.put_bytes(b"written while there is room, named at the end " * 30)
            filler = _fill(small_fs, leave=0)  # then the disk fills up
            raise RuntimeError("the build's own error")
    filler.unlink()
    with pytest.raises(StoreError, match="No space left on device"):
        with store.group_commit(window_s=3600):
            with store.batch():
                store.put_bytes(b"another object, named at the end " * 60)
            _fill(small_fs, leave=0)


@pytest.mark.parametrize("free_kib", [0, 40, 200, 400, 700])
def test_a_disk_filling_up_mid_build_loses_no_paid_answer(
        free_kib: int, small_fs: Path, standin: StandIn, env: dict[str, str], tmp_path: Path) -> None:
    """The build keeps a reserve of space (store/core/reserve.py); when the disk fills up under it, it gives
    the reserve up, stores every answer it paid for and stops: whatever room was left, none is lost."""
    ws = _workspace(tmp_path / "ws", standin)
    store_dir = small_fs / "store"
    build = _build(ws, {**env, "CLAW_STORE": str(store_dir)}, "2")
    deadline = time.monotonic() + 60
    while _run_requests(standin) < 3 and time.monotonic() < deadline and build.poll() is None:
        time.sleep(0.02)
    assert (store_dir / "reserve").exists(), "the build keeps its reserve while there is room"
    _fill(small_fs, leave=free_kib << 10)
    _, err = build.communicate(timeout=120)
    assert "Traceback" not in err
    sent, stored = _run_requests(standin), _stored_runs(store_dir)
    assert sent == stored, (free_kib, sent, stored, err)  # every paid answer is in the store
    if build.returncode == 3:
        assert "no paid answer was lost" in err.strip().splitlines()[-1], err
        assert sent < CASES
    else:
        assert build.returncode == 0 and sent == CASES, err


def test_a_lost_window_names_only_paid_answers(small_fs: Path, standin: StandIn, env: dict[str, str],
                                                tmp_path: Path) -> None:
    # checks lost with the last window were named "paid answer(s) … lost", each "? USD", so the lost sum read unknown
    ws = Workspace(tmp_path / "ws")
    check = [{"check_id": "answered", "declarative": {"kind": "final_response_present"}}]
    for index in range(4):
        ws.case(f"c{index}", f"Question number {index}?", deterministic_checks=check)
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=4)
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(7))
    store_dir = small_fs / "store"
    Store(store_dir)
    _fill(small_fs, leave=80 << 10)  # room for the window's answers, not for its commit
    build = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "build", *RUNS, "--evaluation-profile", "ev"],
                             cwd=ws.root, env={**os.environ, **env, "CLAW_STORE": str(store_dir),
                                               "CLAW_STORE_RETRY_SECONDS": "1"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = build.communicate(timeout=120)
    assert build.returncode == 3 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert "paid answer(s) could not be stored and are lost" in last and "checks/" not in last, last
    assert "unknown" not in last, last  # (the stand-in reports every run's cost)
    assert "check or result record(s) not kept either: free, computed again" in last, last
