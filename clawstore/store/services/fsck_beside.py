"""fsck on both cores: items of a list handed to a forked helper from its end while fsck takes them from the front
(`FromTheEnd`). The packs (`PackHelper`): a process forked before the packs are read verifies the packs it is sent
and writes the edges file of each that verifies whole, as fsck would; fsck then takes such a pack up as already
verified, by the digest the helper answers (hashed before it verified the pack: not hashed, nor its file read, again).
The records' grouping (fsck.py `_GroupedBeside`, `Once`): a process forked before the packs are read groups them and
answers where its rows are. The records' groups (fsck.py `_check_records`): a process forked once they are grouped
checks the groups it is sent and answers its findings. What a helper finds damaged (a pack), or never answers (it
died, the fork failed), or answers unreadably, fsck does itself, so what fsck reports is the same with or without it
(tests/store/test_fsck_beside.py, test_fsck_groups_beside.py, test_fsck_grouped_beside.py; its answers:
test_fsck_from_the_end.py). Forked only in the `claw` program, on Linux, with two CPUs allowed and no thread running.
docs/gc-and-archives.md (Scale: gc and fsck)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from clawstore.host.beside import Beside
from clawstore.store import edges
from clawstore.store.core.edgefile import EdgeLog
from clawstore.store.core.packfile import NotAPackError, pack_path, scan_pack, writer_alive

AHEAD = 2  # packs sent to the helper and not yet answered: it never waits for this side to take up the next


def verify_whole(root: Path, packs_dir: Path, tmp_dir: Path, pack: str, by_arrays: bool = False) -> bytes | None:
    """Verify a sealed pack no verified edges file covers and write its file when every blob verifies (what fsck's
    `_verify_pack` writes); nothing for a pack that is damaged, unsealed, being written or already covered. The
    pack's digest (hashed before it was read) if every blob of it verified, here or by an earlier fsck, else None.
    `by_arrays`: its file made by numpy (EdgeLog.against)."""
    path = pack_path(packs_dir, pack)
    try:
        scan = scan_pack(path)
        if not scan.sealed or writer_alive(path):
            return None
        digest = edges.pack_digest(path)  # hashed before it is read, as fsck does
        cached = edges.load(root, packs_dir, pack, digest, verified=True)
        if cached is not None and cached.verified:
            return digest
        del cached
        named = EdgeLog()
        with open(path, "rb") as fh:
            for _, bad in edges.verify_noting(fh, pack, scan.blobs, named, facts=True):
                if bad:
                    return None  # (fsck verifies it again and names the damage)
    except (OSError, ValueError, NotAPackError):
        return None
    saved = edges.save(root, tmp_dir, scan, pack, digest, named, verified=True, by_arrays=by_arrays)
    return digest if saved is not None else None


class FromTheEnd(Beside):
    """Items of a list handed to a forked helper from its end while this side takes them from the front (AHEAD at a
    time, so that the helper never waits for this side). `work(item)` is what the helper does of an item: its answer,
    one line (sent led by the item's name; a newline in it ends the helper). `before(i)` is called before this side
    does items[i]: it returns once any item the helper was sent at i or beyond is answered (or the helper gone), with
    the helper's answer of item i (None: not done, do it here)."""

    def __init__(self, items: list[str], work: Callable[[str], bytes], fork: bool) -> None:
        fork = fork and len(items) > 1 and _forkable()
        super().__init__(lambda requests, answers: _serve(work, requests, answers), fork)
        self._items = items
        self._next = len(items) - 1  # the next item sent, from the end
        self._waiting: list[int] = []  # sent, not yet answered (oldest first)
        self._answered: dict[int, bytes] = {}
        self._partial = bytearray()  # an answer's bytes read so far
        self._top_up(0)

    def before(self, index: int) -> bytes | None:
        if self._pid is not None:
            self._read(block=False)
            while self._pid is not None and self._waiting and min(self._waiting) <= index:
                self._read(block=True)
            self._top_up(index + 1)
        return self._answered.pop(index, None)

    def _top_up(self, front: int) -> None:
        while self._send is not None and len(self._waiting) < AHEAD and self._next >= front:
            try:
                self._send.write(self._items[self._next].encode() + b"\n")
                self._send.flush()
            except OSError:
                self.close()
                return
            self._waiting.append(self._next)
            self._next -= 1

    def _read(self, block: bool) -> None:
        """Take the helper's answers (a line an item, in the order sent, each led by its item's name); EOF, or a line
        that is not the next item's: it is gone (killed), and this side does what it was sent."""
        assert self._answers is not None
        fd = self._answers.fileno()
        while self._waiting:
            if not block and not select.select([fd], [], [], 0)[0]:
                return
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self._waiting = []
                self.close()
                return
            searched = len(self._partial)  # (a long answer comes in many reads: each byte searched once)
            self._partial += chunk
            while (end := self._partial.find(b"\n", searched)) >= 0:
                named = self._items[self._waiting[0]].encode() + b" " if self._waiting else None
                if named is None or not self._partial.startswith(named):  # (a line not the next item's answer:
                    self._waiting = []  # none after it is known to be whose it seems, so none is taken)
                    self.close()
                    return
                self._answered[self._waiting.pop(0)] = bytes(self._partial[len(named):end])
                del self._partial[:end + 1]
                searched = 0
            block = False


class PackHelper(FromTheEnd):
    """The packs' helper: `before(i)` is called before fsck verifies packs[i]; `digest(answer)` reads its answer: the
    pack's digest if the helper verified every blob of it (its edges file written), else None (fsck does the pack)."""

    def __init__(self, root: Path, packs_dir: Path, tmp_dir: Path, packs: list[str], fork: bool, arrays: bool = False
                 ) -> None:
        """`arrays`: the helper (a forked process: `verified` runs nowhere else) makes its edges files by numpy
        (EdgeLog.against, ~0.1 s a pack of 50,000 objects less); fsck's own process does not beside the packs, where
        its memory peaks (+10 MB)."""
        def verified(pack: str) -> bytes:
            digest = verify_whole(root, packs_dir, tmp_dir, pack, by_arrays=arrays)
            return digest.hex().encode() if digest is not None else b""

        super().__init__(packs, verified, fork)

    @staticmethod
    def digest(answer: bytes | None) -> bytes | None:
        try:
            digest = bytes.fromhex(answer.decode("ascii")) if answer else None
        except ValueError:
            return None
        return digest if digest is not None and len(digest) == 32 else None


class Once(Beside):
    """One piece of work done by a forked helper while this side does other work (the records' grouping, beside the
    packs' verification): `work()` is run there, its answer one line. `answer()` waits for it: None if there is none
    to take (not forked, the helper died or answered no whole line): this side then does the work itself."""

    def __init__(self, work: Callable[[], bytes], fork: bool) -> None:
        fork = fork and _forkable()
        super().__init__(lambda _requests, answers: _answer_once(work, answers), fork)
        self.forked = self._pid is not None

    def answer(self) -> bytes | None:
        if self._answers is None:
            return None
        try:
            said = self._answers.read()  # (to its end: the helper's exit, however it ends)
        except OSError:
            said = b""
        self.close()
        return said[:-1] if said.endswith(b"\n") and said.count(b"\n") == 1 else None


def _answer_once(work: Callable[[], bytes], answers: int) -> None:
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        answer = work()
        with os.fdopen(answers, "wb") as sink:
            sink.write(answer + b"\n")
    except BaseException:  # noqa: BLE001 - this side does it when no answer comes
        code = 1
    os._exit(code)


def _serve(work: Callable[[str], bytes], requests: int, answers: int) -> None:
    """The forked process: do each item it is sent and answer it, exit without the command's cleanup (os._exit) when
    the requests end."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        with os.fdopen(requests, "rb") as source, os.fdopen(answers, "wb") as sink:
            for line in source:
                item = line.decode().strip()
                sink.write(item.encode() + b" " + work(item) + b"\n")  # (named: an answer is never taken for another's)
                sink.flush()
    except BaseException:  # noqa: BLE001 - this side does what is not answered
        code = 1
    os._exit(code)


def _forkable() -> bool:
    """A helper may be forked: no other thread running (a fork copies only the calling one, and a lock another holds
    would stay held in the child) and a second CPU to run it on."""
    return threading.active_count() == 1 and _cpus() > 1


def _cpus() -> int:
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
