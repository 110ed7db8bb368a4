"""fsck's first pass on both cores: a process forked before the packs are read verifies the packs it is sent (the
last ones, a pack or two ahead of it) and writes the edges file of each that verifies whole, as fsck would; fsck then
takes such a pack up as already verified (it hashes it again). A pack the helper finds damaged, or never reaches (it
died, the fork failed), is verified by fsck itself, so what fsck reports is the same with or without it
(tests/store/test_fsck_beside.py). Forked only in the `claw` program, on Linux, with two CPUs allowed and no thread
running. docs/gc-and-archives.md (Scale: gc and fsck)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from pathlib import Path

from clawstore.host.beside import Beside
from clawstore.store import edges
from clawstore.store.core.edgefile import EdgeLog
from clawstore.store.core.packfile import NotAPackError, pack_path, scan_pack, writer_alive

AHEAD = 2  # packs sent to the helper and not yet answered: it never waits for this side to take up the next


def verify_whole(root: Path, packs_dir: Path, tmp_dir: Path, pack: str) -> None:
    """Verify a sealed pack no verified edges file covers and write its file when every blob verifies (what fsck's
    `_verify_pack` writes); nothing for a pack that is damaged, unsealed, being written or already covered."""
    path = pack_path(packs_dir, pack)
    try:
        scan = scan_pack(path)
        if not scan.sealed or writer_alive(path):
            return
        digest = edges.pack_digest(path)  # hashed before it is read, as fsck does
        cached = edges.load(root, packs_dir, pack, digest)
        if cached is not None and cached.verified:
            return
        del cached
        named = EdgeLog()
        with open(path, "rb") as fh:
            for blob, reason, children, fact in edges.verify_blobs(fh, pack, scan.blobs, facts=True):
                if reason is not None:
                    return  # (fsck verifies it again and names the damage)
                if children is not None:
                    named.add(blob.id, blob.offset, children, fact)
    except (OSError, ValueError, NotAPackError):
        return
    edges.save(root, tmp_dir, scan, pack, digest, named, verified=True)


class PackHelper(Beside):
    """The helper, fed from the end of `packs` while fsck takes them from the front: `before(i)` is called before fsck
    verifies packs[i]; it returns once any pack the helper was sent at i or beyond is answered (or the helper gone)."""

    def __init__(self, root: Path, packs_dir: Path, tmp_dir: Path, packs: list[str], fork: bool) -> None:
        fork = fork and len(packs) > 1 and threading.active_count() == 1 and _cpus() > 1
        super().__init__(lambda requests, answers: _helper(root, packs_dir, tmp_dir, requests, answers), fork)
        self._packs = packs
        self._next = len(packs) - 1  # the next pack sent, from the end
        self._waiting: list[int] = []  # sent, not yet answered (oldest first)
        self._top_up(0)

    def before(self, index: int) -> None:
        if self._pid is None:
            return
        self._read(block=False)
        while self._pid is not None and self._waiting and min(self._waiting) <= index:
            self._read(block=True)
        self._top_up(index + 1)

    def _top_up(self, front: int) -> None:
        while self._send is not None and len(self._waiting) < AHEAD and self._next >= front:
            try:
                self._send.write(self._packs[self._next].encode() + b"\n")
                self._send.flush()
            except OSError:
                self.close()
                return
            self._waiting.append(self._next)
            self._next -= 1

    def _read(self, block: bool) -> None:
        """Take the helper's answers (one newline a pack, in the order sent); EOF: it is gone, and fsck verifies what
        it was sent."""
        assert self._answers is not None
        fd = self._answers.fileno()
        while self._waiting:
            if not block and not select.select([fd], [], [], 0)[0]:
                return
            chunk = os.read(fd, 4096)
            if not chunk:
                self._waiting = []
                self.close()
                return
            self._waiting = self._waiting[chunk.count(b"\n"):]
            block = False


def _helper(root: Path, packs_dir: Path, tmp_dir: Path, requests: int, answers: int) -> None:
    """The forked process: verify each pack it is sent, answer a newline when done, exit without the command's
    cleanup (os._exit) when the requests end."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        with os.fdopen(requests, "rb") as source, os.fdopen(answers, "wb", buffering=0) as sink:
            for line in source:
                verify_whole(root, packs_dir, tmp_dir, line.decode().strip())
                sink.write(b"\n")
    except BaseException:  # noqa: BLE001 - fsck verifies what is not answered
        code = 1
    os._exit(code)


def _cpus() -> int:
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
