"""A push or pull stopped by SIGTERM (a scheduler's stop, `timeout`, `docker stop`) or Ctrl-C ends as the
README promises for every command: promptly, exit 130, one line, nothing of it left in the store's tmp/
(or on a directory remote), and the next run finishes the job. Over a slow link (bench/_throttle.py)
the stop lands mid-transfer."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench._throttle import throttled
from clawstore.remote.backends import DirectoryBackend, Moved
from clawstore.remote.push import _Outgoing, _Sender
from clawstore.remote.sync import SyncReport
from tests.support.prepared import claw_here
from tests.support.s3server import make_bucket

DATA_MIB = 64
LINK = 8 << 20  # bytes a second: the data take 8 s to move, so a stop lands mid-transfer
# A stop ends the process within this, where finishing the files in flight would take 5-6 s more. (An
# upload stops once the bytes the kernel already took for it have left: a few MB on loopback.)
PROMPT_S = 3.5
# A pull's stop waits for each request in flight to reach its next chunk: for the S3 server and the relay, which share
# the machine, to answer. At load 25 that took 6.9 s (0.3-0.5 s at load 4-9, 0.1-0.2 s of it claw's CPU; not stopping
# the download took 7.0-7.3 s): the bound grows with how long the same pull took to start, from its launch to its
# first byte (0.6-1.5 s at load 4-9), the same kinds of work on the same machine in the same minute.
STARTED_UNLOADED_S = 1.0
# The bytes that may arrive after it: each stream's chunk in flight (S3's 10 of 256 KiB) and what the sockets hold
MOVED_AFTER_STOP = 16 << 20


def claw(*args: str, cwd: Path, endpoint: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=cwd, env=_env(endpoint),
                          capture_output=True, text=True, timeout=120)


def here(*args: str, cwd: Path, endpoint: str) -> str:
    """`claw ARGS` in this process, for a step that only prepares what a test is about (a put, the push a pull is
    stopped in) or reads what it left (ls-tree, the last fsck): it succeeded; its stdout."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", endpoint)
        code, out, err = claw_here(*args, cwd=cwd)
    assert code == 0, err
    return out


def _env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    return {**env, "AWS_ENDPOINT_URL": endpoint}


def stop_when(proc: subprocess.Popen[str], started: Callable[[], bool],
              arrived: Callable[[], int] | None = None, moved: list[int] | None = None) -> float:
    """Send SIGTERM once the process catches it (claw's handler is set once its command is chosen: a loaded
    machine can take seconds to get there) and `started()` holds (asked only from then on); the seconds the
    process took to end after it. With `arrived` (bytes so far), `moved` is given the most that arrived after the
    stop (sampled until the process ended)."""
    deadline = time.monotonic() + 60
    while not (_catches_sigterm(proc.pid) and started()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, f"ended before the stop: {proc.communicate()[1]}"
    at_stop = arrived() if arrived is not None else 0
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    most = 0
    while proc.poll() is None and time.monotonic() < sent + 60:
        most = max(most, arrived() - at_stop) if arrived is not None else 0
        time.sleep(0.01)
    proc.wait(timeout=1)
    if moved is not None:
        moved.append(most)
    return time.monotonic() - sent


def _catches_sigterm(pid: int) -> bool:
    """The process has a handler for SIGTERM (its bit in /proc's SigCgt mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(mask >> (signal.SIGTERM - 1) & 1)


def seconds_later(seconds: float) -> Callable[[], bool]:
    """True from `seconds` after its first call on."""
    first: list[float] = []

    def passed() -> bool:
        if not first:
            first.append(time.monotonic())
        return time.monotonic() > first[0] + seconds

    return passed


def tmp_bytes(store: Path) -> int:
    return sum(f.stat().st_size for f in (store / "tmp").rglob("*") if f.is_file()) if (store / "tmp").exists() else 0


def arrived_bytes(store: Path) -> int:
    """The bytes that arrived in the store's tmp/: blocks written (a download's file has its full size from the
    start: its size said 8 MiB had arrived before a byte had, and the stop landed before the transfer)."""
    tmp = store / "tmp"
    return sum(f.stat().st_blocks * 512 for f in tmp.rglob("*") if f.is_file()) if tmp.exists() else 0


@pytest.fixture
def filled(tmp_path: Path, aws_env: str) -> Iterator[tuple[Path, str, str]]:
    """Workspace A whose store holds a tree of DATA_MIB MiB that do not compress (its id), and an empty
    bucket."""
    a = tmp_path / "a"
    (a / "data").mkdir(parents=True)
    for i in range(DATA_MIB):
        (a / "data" / f"f{i}").write_bytes(os.urandom(1 << 20))
    tree = here("put", "data", cwd=a, endpoint=aws_env).strip()
    bucket = "stop-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    yield a, f"s3://{bucket}/team", tree


def test_a_pull_stopped_mid_transfer_ends_promptly_and_leaves_nothing(filled: tuple[Path, str, str], aws_env: str,
                                                                     tmp_path: Path) -> None:
    a, remote, tree = filled
    here("push", remote, cwd=a, endpoint=aws_env)
    b = tmp_path / "b"
    b.mkdir()
    with throttled(aws_env, LINK) as link:
        proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "pull", remote], cwd=b, env=_env(link),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        launched, first_byte = time.monotonic(), []

        def mid_transfer() -> bool:
            arrived = arrived_bytes(b / "store")
            if arrived and not first_byte:
                first_byte.append(time.monotonic())
            return arrived > (8 << 20)

        moved: list[int] = []
        took = stop_when(proc, mid_transfer, lambda: arrived_bytes(b / "store"), moved)
    assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
    assert proc.stderr is not None and proc.stderr.read().strip().splitlines()[-1] == "claw: interrupted"
    bound = PROMPT_S * max(1.0, (first_byte[0] - launched) / STARTED_UNLOADED_S)
    assert took < bound, f"the pull took {took:.1f} s to stop ({bound:.1f} s allowed)"
    # (what a stop that finished the pack in flight fails whatever the load: its 56 MiB still to come)
    assert moved[0] < MOVED_AFTER_STOP, f"{moved[0] >> 20} MiB arrived after the stop"
    assert tmp_bytes(b / "store") == 0, sorted((b / "store" / "tmp").rglob("*"))
    fsck = claw("fsck", cwd=b, endpoint=aws_env)
    assert fsck.returncode == 0 and "temp files: 0" in fsck.stdout, fsck.stdout + fsck.stderr
    assert claw("pull", remote, cwd=b, endpoint=aws_env).returncode == 0
    assert len(here("ls-tree", tree, cwd=b, endpoint=aws_env).splitlines()) == DATA_MIB


def test_a_push_stopped_mid_transfer_ends_promptly_and_leaves_nothing(filled: tuple[Path, str, str],
                                                                     aws_env: str) -> None:
    a, remote, _ = filled
    with throttled(aws_env, LINK) as link:
        proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "push", remote], cwd=a, env=_env(link),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # 2 s after its handler is set: mid-transfer (the store's own sealed pack is uploaded as it is: nothing in tmp/)
        took = stop_when(proc, seconds_later(2))
    assert proc.returncode == 130
    assert proc.stderr is not None and proc.stderr.read().strip().splitlines()[-1] == "claw: interrupted"
    assert took < PROMPT_S, f"the push took {took:.1f} s to stop"
    assert tmp_bytes(a / "store") == 0, sorted((a / "store" / "tmp").rglob("*"))
    assert claw("push", remote, cwd=a, endpoint=aws_env).returncode == 0
    here("fsck", cwd=a, endpoint=aws_env)


SLOW_CHUNK_S = 0.25  # the 16 chunks of a 16 MiB pack: 4 s


class _SlowDirectory(DirectoryBackend):
    """A directory remote on a slow share: each chunk of an upload takes SLOW_CHUNK_S."""

    def upload(self, source: Path, name: str, moved: Moved = None) -> None:
        def slow(nbytes: int) -> None:
            time.sleep(SLOW_CHUNK_S)
            if moved is not None:
                moved(nbytes)
        super().upload(source, name, slow)


def test_an_interrupted_push_to_a_directory_stops_its_copies_and_leaves_no_temp_file(tmp_path: Path) -> None:
    """A directory remote's upload can be cut short from its callback, and removes its temp file then:
    an interrupted push stops its copies at their next chunk (a quick end of the process would leave
    the half-written temp files on the share)."""
    remote = tmp_path / "remote"
    backend = _SlowDirectory(remote)
    pack = tmp_path / "work" / "one.pack"
    pack.parent.mkdir()
    pack.write_bytes(os.urandom(16 << 20))
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with _Sender(backend, pack.parent, SyncReport("pushed to", "here"), {}, {}) as sender:
            sender.send(_Outgoing(pack, []))
            time.sleep(3 * SLOW_CHUNK_S)  # two chunks copied
            raise KeyboardInterrupt
    took = time.monotonic() - began
    assert took < 3 * SLOW_CHUNK_S + 1.0, f"the push waited {took:.1f} s for its copy"
    assert [p.name for p in remote.rglob("*") if p.is_file()] == []



def kept_packs(store: Path, larger_than: int = 0) -> list[Path]:
    """The packs pulls keep for a pull run again (remote/downloads.py)."""
    return sorted(p for p in store.glob("remotes/*/incoming/*.pack") if p.stat().st_size > larger_than)


def test_a_pull_killed_mid_transfer_resumes_from_the_packs_it_had(aws_env: str, tmp_path: Path) -> None:
    """SIGKILL runs no cleanup. The packs that had arrived whole are kept (links in the remote's cache):
    the pull run again takes them instead of downloading them again. The scratch directory the kill left
    in tmp/ is named by its process: fsck counts it stale and gc removes it, as a killed writer's temp
    file (a directory of another name is not claw's and stays)."""
    a = tmp_path / "a"
    trees = []
    for name, mib in (("first", 12), ("second", 10)):  # two puts, two packs: both arrive one after another
        (a / name).mkdir(parents=True)
        for i in range(mib):
            (a / name / f"f{i}").write_bytes(os.urandom(1 << 20))
        trees.append((here("put", name, cwd=a, endpoint=aws_env).strip(), mib))
    bucket = "kill-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    remote = f"s3://{bucket}/team"
    here("push", remote, cwd=a, endpoint=aws_env)
    b = tmp_path / "b"
    b.mkdir()
    with throttled(aws_env, LINK) as link:
        proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "pull", remote], cwd=b, env=_env(link),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not kept_packs(b / "store", 8 << 20) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # the second pack is on its way (1.3 s at this link)
        proc.wait(timeout=60)
    kept = kept_packs(b / "store")
    big = kept_packs(b / "store", 8 << 20)
    assert len(big) == 1 and tmp_bytes(b / "store") >= big[0].stat().st_size, [p.stat().st_size for p in kept]
    foreign = b / "store" / "tmp" / "someone-elses"
    foreign.mkdir()
    (foreign / "file").write_bytes(b"kept")
    fsck = claw("fsck", cwd=b, endpoint=aws_env)
    assert fsck.returncode == 0 and "(1 stale)" in fsck.stdout, fsck.stdout + fsck.stderr
    gc = claw("gc", cwd=b, endpoint=aws_env)
    assert gc.returncode == 0 and "1 stale temp files" in gc.stdout, gc.stdout + gc.stderr
    assert tmp_bytes(b / "store") == len(b"kept")
    assert kept_packs(b / "store") == kept  # (younger than gc's grace period)
    pulled = claw("pull", remote, cwd=b, endpoint=aws_env)
    assert pulled.returncode == 0, pulled.stderr
    assert f"{len(kept)} pack(s) already downloaded by another pull, not again" in pulled.stdout, pulled.stdout
    assert kept_packs(b / "store") == []
    for tree, mib in trees:
        assert len(here("ls-tree", tree, cwd=b, endpoint=aws_env).splitlines()) == mib
    here("fsck", cwd=b, endpoint=aws_env)
