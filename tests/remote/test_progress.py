"""`claw push` / `claw pull` show the packs moving: every pack byte is counted once, from the directory
backend's copy loop and boto3's callbacks alike, and drawn as plain lines or a live bar."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from clawstore.remote.backends import open_backend
from clawstore.remote.config import Remote
from clawstore.remote.progress import EVERY_S, LiveTransferProgress, PlainTransferProgress, TransferProgress
from clawstore.remote.pull import pull
from clawstore.remote.push import push
from clawstore.remote.sync import PACKS
from clawstore.store import Store
from tests.config.workspace_builder import claw


def _store(root: Path) -> Store:
    """Results, and 10 MB that does not compress: a pack bigger than one GET (boto3 moves it in parts,
    calling back from its threads)."""
    store = Store(root)
    with store.batch():
        for _ in range(10):
            store.put_bytes(os.urandom(1 << 20))
        for i in range(30):
            key = store.put_json({"input": i})
            store.put_action(key, {"kind": "run", "key": key, "status": "success",
                                   "outputs": {"answer": store.put_json({"answer": i})}})
    return store


def _pack_bytes(url: str) -> int:
    return sum(size for name, size in open_backend(url).list(PACKS).items() if name.endswith(".pack"))


def test_push_and_pull_count_every_pack_byte_once(remote_url: str, tmp_path: Path) -> None:
    source = _store(tmp_path / "a")
    remote = Remote("team", remote_url)
    sent = TransferProgress()
    pushed = push(source, remote, progress=sent)
    on_remote = _pack_bytes(remote_url)
    assert on_remote > 10 << 20
    assert sent.total_bytes == sent.done_bytes == on_remote
    assert sent.total_packs == sent.done_packs == pushed.packs

    received = TransferProgress()
    pulled = pull(Store(tmp_path / "b"), remote, progress=received)
    assert received.total_bytes == received.done_bytes == on_remote
    assert received.total_packs == received.done_packs == pulled.packs
    assert received.step == "adding them to the store"  # (after "checking the entries")

    again = TransferProgress()  # nothing left to move: nothing planned
    pull(Store(tmp_path / "b"), remote, progress=again)
    assert (again.total_bytes, again.total_packs) == (0, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_say_where_then_the_counts_every_few_seconds_then_each_step() -> None:
    out, clock = io.StringIO(), Clock()
    shown = PlainTransferProgress(out, "pulling", "from s3://team/x", clock=clock)
    shown.plan(2, 4_000_000)
    clock.now += 1
    shown.advance(1_000_000)  # too soon for a line
    clock.now += EVERY_S
    shown.advance(1_000_000)
    shown.pack_done()  # (a line was just printed)
    shown.advance(2_000_000)
    shown.then("checking the entries")
    shown.plan(1, 1_000_000)  # (a narrowed pull's next round: bytes move again, the step is over)
    assert shown.step == "" and shown.total_bytes == 5_000_000
    assert out.getvalue().splitlines() == [
        "pulling from s3://team/x",
        f"  2.0 MB of 4.0 MB (50%), 0 of 2 pack(s), {2.0 / (1 + EVERY_S):.1f} MB/s",
        "  checking the entries",
    ]


def test_live_bar_shows_bytes_and_packs() -> None:
    screen = io.StringIO()
    shown = LiveTransferProgress(screen, "pushing", "to /srv/team",
                                 console=Console(file=screen, force_terminal=True, width=120))
    shown.plan(2, 3_000_000)
    shown.advance(1_500_000)
    shown.pack_done()
    shown.progress.refresh()
    drawn = screen.getvalue()
    shown.close()
    assert "pushing to /srv/team" in drawn and "1.5/3.0 MB" in drawn and "1/2 packs" in drawn


@pytest.mark.parametrize("remote_url", ["dir"], indirect=True)
def test_the_cli_shows_progress_when_asked_and_stays_quiet_in_a_pipe(remote_url: str, tmp_path: Path) -> None:
    _store(tmp_path / "store")
    pushed = claw("push", remote_url, "--store", str(tmp_path / "store"), "--progress", "plain", cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stderr.splitlines()[0] == f"pushing to {remote_url}"
    pulled = claw("pull", remote_url, "--store", str(tmp_path / "other"), cwd=tmp_path)  # auto, not a terminal
    assert pulled.returncode == 0 and pulled.stderr == "", pulled.stderr
    assert pulled.stdout.startswith(f"pulled from {remote_url}: 2 pack(s)")
