"""A SIGKILLed build's scratch does not pile up in the system's temp directory: a run's `claw-run-*` (its sandbox;
an OpenClaw run's mounted root, its transcript's private copy: up to a GiB) was removed only in `finally` blocks, so
a killed build left it forever. The next `claw build` or `claw gc` removes the scratch whose owner process is gone,
never a live one's (real `claw` processes, the stand-in server, real SIGKILLs, a real concurrent holder)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import CLAW, run_claw
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.reaped import Reap
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
# A process holding a scratch directory as a run does (host/scratch.py's scratch_dir) until it is killed.
HOLDER = """
import sys, time
from pathlib import Path
from clawstore.host.scratch import scratch_dir
with scratch_dir("claw-run-") as path:
    (Path(path) / "sandbox").mkdir()
    (Path(path) / "sandbox" / "made.txt").write_text("a run's file")
    print(path, flush=True)
    time.sleep(600)
"""


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temp directory of every process the test starts (claw's scratch goes there)."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    return path


def _holder() -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], env=dict(os.environ), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def _killed(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _scratch(temp: Path) -> set[Path]:
    return set(temp.glob("claw-run-*"))


def test_a_killed_builds_scratch_is_removed_by_gc_and_a_live_ones_kept(tmp_path: Path, temp: Path, standin: StandIn,
                                                                      env: dict[str, str]) -> None:  # noqa: F811
    ws = Workspace(tmp_path / "ws")
    ws.case("tools", "Read a file.", input={"messages": [{"role": "user", "content": "Read a file."}],
                                           "context": {"llm_probe": {"tools": ["read_file"]}}})
    ws.suite("main", ["m1"])
    ws.run_profile(defaults={"timeout_seconds": 60})
    standin.set_default(text("four", latency=30))
    build = subprocess.Popen([CLAW, "build", *CAMPAIGN], cwd=ws.root, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _scratch(temp) and time.monotonic() < deadline:  # (its run made its sandbox: it is asking)
            time.sleep(0.02)
        time.sleep(0.5)
    finally:
        _killed(build)
    left = _scratch(temp)
    assert len(left) == 1, left  # the killed run's sandbox, left behind
    live, live_path = _holder()
    try:
        unowned_old, unowned_young = temp / "claw-run-before62", temp / "claw-run-before62-young"
        for path in (unowned_old, unowned_young):  # (a claw before session 62 made them: no owner file)
            (path / "sandbox").mkdir(parents=True)
        two_days_ago = time.time() - 2 * 86400
        os.utime(unowned_old, (two_days_ago, two_days_ago))

        gc = run_claw(ws.root, "gc")
        assert gc.code == 0, gc
        assert "removed 2 scratch directories killed runs left in the temp directory" in gc.stdout, gc
        assert _scratch(temp) == {live_path, unowned_young}
        assert (live_path / "sandbox" / "made.txt").read_text() == "a run's file"
    finally:
        _killed(live)

    standin.set_default(text("four"))
    assert run_claw(ws.root, "build", *CAMPAIGN).code == 0  # the next build sweeps the holder SIGKILL left
    assert _scratch(temp) == {unowned_young}


RACER = """
import sys, time
from pathlib import Path
from clawstore.host.scratch import scratch_dir
lost = 0
for i in range(int(sys.argv[1])):
    with scratch_dir("claw-run-") as path:
        try:
            (Path(path) / "f").write_text(str(i))
            time.sleep(0.001)
            lost += not (Path(path) / "f").is_file() or not Path(path, ".claw-owner").is_file()
        except OSError:  # (swept under it)
            lost += 1
print(lost, flush=True)
"""
SWEEPER = """
import os, sys
from clawstore.host.scratch import sweep_dead_scratch
while not os.path.exists(sys.argv[1]):
    sweep_dead_scratch()
"""


def test_sweeps_beside_live_owners_never_take_their_scratch(tmp_path: Path, temp: Path) -> None:
    """Owners making and removing scratch as fast as they can while another process sweeps without a pause: the
    moment a directory is made, before its owner file is locked, is never taken for a dead owner's."""
    done = tmp_path / "done"
    sweeper = subprocess.Popen([sys.executable, "-c", SWEEPER, str(done)], env=dict(os.environ))
    try:
        racers = [subprocess.Popen([sys.executable, "-c", RACER, "400"], env=dict(os.environ),
                                   stdout=subprocess.PIPE, text=True) for _ in range(2)]
        lost = [int(r.communicate(timeout=300)[0]) for r in racers]
    finally:
        done.touch()
        sweeper.wait(timeout=60)
    assert lost == [0, 0]
    assert _scratch(temp) == set()


def test_a_link_or_another_named_entry_is_not_swept(temp: Path) -> None:
    from clawstore.host.scratch import sweep_dead_scratch

    target = temp / "kept"
    target.mkdir()
    (temp / "claw-run-link").symlink_to(target)
    (temp / "claw-demo-x").mkdir()  # (claw demo's workspace is the user's)
    old = time.time() - 2 * 86400
    for path in (target, temp / "claw-demo-x"):
        os.utime(path, (old, old))
    assert sweep_dead_scratch(temp) == (0, 0)  # (named: this process's gettempdir() may be cached from before)
    assert target.is_dir() and (temp / "claw-run-link").is_symlink() and (temp / "claw-demo-x").is_dir()




def _aged(path: Path) -> Path:
    two_days_ago = time.time() - 2 * 86400
    os.utime(path, (two_days_ago, two_days_ago))
    return path


def test_an_old_directory_claw_did_not_make_is_not_swept(temp: Path) -> None:
    """The age rule is for a claw before session 62's scratch only: a user's own `claw-run-notes` (not a name
    tempfile gives) or a `claw-configs-20251201` holding their files (TMPDIR may be $HOME) is never removed."""
    from clawstore.host.scratch import sweep_dead_scratch

    users = [temp / "claw-run-notes-2025", temp / "claw-configs-20251201"]
    for path in users:
        path.mkdir()
        (path / "notes.txt").write_text("the user's")
        _aged(path)
    claws = temp / "claw-run-abc_1234"  # (what a claw before session 62 left: its sandbox)
    (claws / "sandbox").mkdir(parents=True)
    _aged(claws)
    removed, _ = sweep_dead_scratch(temp)  # (named: this process's gettempdir() was read before TMPDIR was set)
    assert [p for p in users if not (p / "notes.txt").is_file()] == []
    assert (removed, claws.exists()) == (1, False)


def _owned(temp: Path, name: str, owner: str) -> Path:
    path = temp / name
    path.mkdir()
    (path / ".claw-owner").write_text(owner)
    (path / "sandbox").mkdir()
    return path


def test_an_owner_whose_lock_cannot_be_asked_is_kept(temp: Path) -> None:
    """An unlocked owner file is a dead owner's only where the lock can be trusted: on another host (a TMPDIR on NFS
    shared by two machines, flock local to each) it says nothing, and a file this process holds (flock emulated by
    fcntl on NFS: this process's own probe succeeds, and its close drops the lock) must never be swept by it."""
    import socket

    from clawstore.host.scratch import sweep_dead_scratch

    here = socket.gethostname()
    other_host = _owned(temp, "claw-run-otherhst", f"{os.getpid()} not-{here}\n")
    this_process = _owned(temp, "claw-run-thisproc", f"{os.getpid()} {here}\n")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = _owned(temp, "claw-run-deadproc", f"{dead.stdout.strip()} {here}\n")
    assert sweep_dead_scratch(temp)[0] == 1
    assert (other_host.is_dir(), this_process.is_dir(), gone.exists()) == (True, True, False)


def test_a_fifo_for_an_owner_file_does_not_hang_the_sweep(temp: Path) -> None:
    """A FIFO at `.claw-owner`: opening it to read waited for a writer forever, and every `claw build` with it."""
    path = temp / "claw-run-fifo1234"
    path.mkdir()
    os.mkfifo(path / ".claw-owner")
    sweep = subprocess.run([sys.executable, "-c", "from clawstore.host.scratch import sweep_dead_scratch as s; "
                            "print(s()[0])"], env=dict(os.environ), capture_output=True, text=True, timeout=30)
    assert (sweep.returncode, sweep.stdout.strip()) == (0, "0")
    assert path.is_dir()


def test_two_sweeps_at_once_count_each_directory_once(temp: Path) -> None:
    """`claw gc` beside a starting `claw build`: both find the same dead owners' scratch; each directory is removed
    and counted by one of them (gc said it removed what the build did, and their bytes twice)."""
    for index in range(300):
        path = temp / f"claw-run-dead{index:04d}"
        (path / "sandbox").mkdir(parents=True)
        (path / "sandbox" / "f").write_bytes(b"x" * 100)
        if index % 2:
            (path / ".claw-owner").write_text("1 \n")  # (unlocked: its owner is gone)
        else:
            _aged(path)  # (a claw before session 62's)
    sweep = "from clawstore.host.scratch import sweep_dead_scratch as s; import sys; sys.stdin.read(); print(s()[0])"
    sweeps = [subprocess.Popen([sys.executable, "-c", sweep], env=dict(os.environ), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(1)  # (both imported: they start together when their stdin closes)
    for proc in sweeps:
        assert proc.stdin is not None
        proc.stdin.close()
    counts = []
    for proc in sweeps:
        assert proc.stdout is not None
        counts.append(int(proc.stdout.read()))
        proc.wait(timeout=120)
    assert _scratch(temp) == set()
    assert sum(counts) == 300, counts


def test_a_killed_ray_tasks_scratch_is_swept(temp: Path, reap: Reap) -> None:
    """A Ray task's scratch (`claw-ray-openclaw-*`: a scratch store and the OpenClaw run's root) is an owned one too:
    a worker SIGKILLed mid-task left it, and the next sweep on that node kept it forever."""
    from clawstore.host.scratch import sweep_dead_scratch

    holder = HOLDER.replace('"claw-run-"', '"claw-ray-openclaw-"')
    proc = reap(subprocess.Popen([sys.executable, "-c", holder], env=dict(os.environ), stdout=subprocess.PIPE,
                                 text=True))  # (it sleeps 600 s)
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    assert sweep_dead_scratch(temp)[0] == 0  # (its owner lives)
    _killed(proc)
    assert (sweep_dead_scratch(temp)[0], path.exists()) == (1, False)
