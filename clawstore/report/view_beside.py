"""`claw view`'s run details made on both cores: a process forked when the command starts, before the store is opened
(no thread yet to fork with), walks the heads while this one builds the report, and makes the detail shards it
reaches first (its own store reader: records, bodies, details, JSON) while this one makes the others. It writes only
once its order says its walk was the report's (the same heads, a row for every run it met), and says each shard once
written; whatever it has not said (killed, out of memory, an error, another head) is made here afterwards. Linux
only, and only with two CPUs or more; elsewhere, and when the fork fails, every shard is made here as before. Same
page and shards either way (tests/view/test_view_beside.py). Why: docs/view.md (Scale, Details by module)."""

from __future__ import annotations

import fcntl
import gc
import os
import pickle
import select
import signal
import sys
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

from clawstore.host.beside import Beside
from clawstore.report.view_data import RunKey, ViewData, row_index, run_shards
from clawstore.report.view_page import (
    SHARD_RUNS,
    Written,
    check_out,
    finish_page,
    page_token,
    render_shard,
    write_shard,
    write_shard_body,
)
from clawstore.store.face import StoreReader


@dataclass(frozen=True)
class _Start:
    """Sent as soon as the manifest is ready: the store, the heads the report is about to read, the manifest."""

    root: Path
    heads: list[str]
    manifest: Path | None
    claims: int  # the descriptor of the shards' claims (_Claims), shared with the command


@dataclass(frozen=True)
class _Order:
    """Sent once the report is built: the heads it read, the summary's row keys, the page's path and token."""

    heads: list[str]
    rows: frozenset[RunKey]
    path: Path
    token: str


class _Rows(Container[RunKey]):
    """The summary's row keys, before they are known: every run taken as having a row (it has, unless the report left
    it out), the keys met kept until `known` checks them; then the keys themselves."""

    def __init__(self) -> None:
        self._met: list[RunKey] | None = []
        self._rows: frozenset[RunKey] = frozenset()

    def __contains__(self, key: object) -> bool:
        if self._met is None:
            return key in self._rows
        self._met.append(key)  # type: ignore[arg-type]
        return True

    def known(self, rows: frozenset[RunKey]) -> bool:
        """Take the keys; False when a run met so far has no row (the shards were numbered otherwise)."""
        met, self._met, self._rows = self._met or [], None, rows
        return all(key in rows for key in met)


# This process's ends of the helper's pipes. A process forked later (the tag reader's) would hold them open too: the
# helper would not see the order's pipe end (EOF) nor its answers' reader go (EPIPE) when this process dies.
_HELD: set[int] = set()


def _close_held() -> None:
    for fd in _HELD:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held)


HELPER_NAME = "claw-details"
# Shards the helper makes before its order comes (while the report is built), held rendered until it says where they
# go: about 400 KB each at 5 runs a case.
AHEAD = 8


class _Claims:
    """Who makes each shard: whichever process reaches it first (both walk the same runs in the same order), so each
    makes as many as its speed allows and neither waits for the other at the end (a fixed share, two shards in three,
    left the command idle for the helper's last ones: docs/view.md, Scale). A byte a shard (0: not taken) in a memory
    file both processes hold, taken under a POSIX lock: per process, and let go by the kernel when its holder dies (a
    helper killed while taking one blocks no one)."""

    COMMAND, HELPER = b"c", b"h"

    def __init__(self, fd: int):
        self.fd = fd

    @classmethod
    def new(cls) -> _Claims:
        return cls(os.memfd_create("claw-view-claims", os.MFD_CLOEXEC))

    def take(self, number: int, who: bytes) -> bool:
        """Whether shard `number` is `who`'s to make: taken now, unless the other process took it first."""
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            if os.pread(self.fd, 1, number).strip(b"\0"):
                return False
            os.pwrite(self.fd, who, number)
            return True
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def taken(self, who: bytes, below: int) -> set[int]:
        """The shards under `below` that `who` took."""
        return {number for number, by in enumerate(os.pread(self.fd, below, 0)) if by == who[0]}

    def close(self) -> None:
        os.close(self.fd)


class DetailsBeside(Beside):
    """A forked shard maker: `begin` and `write_view` hand it its share, `close` ends it. Not `fork`, or a process
    allowed one CPU: none (a process running commands in itself, tests' CliRunner, keeps its threads: forking it is
    unsafe)."""

    def __init__(self, fork: bool = True) -> None:
        self._begun = False  # (told the heads: `start` follows)
        # One core: the helper's share would run after this process's, and its walk of the heads is work added.
        fork = fork and sys.platform == "linux" and len(os.sched_getaffinity(0)) >= 2
        self.claims: _Claims | None = None
        if fork:
            try:
                self.claims = _Claims.new()
            except OSError:
                fork = False
        super().__init__(_helper, fork)
        if self._send is not None and self._answers is not None:
            _HELD.update((self._send.fileno(), self._answers.fileno()))
        elif self.claims is not None:
            self.claims.close()
            self.claims = None

    def begin(self, root: Path, heads: list[str], manifest: Path | None) -> None:
        """Let the helper start walking the heads (the report is built meanwhile)."""
        if self._send is None:
            return
        try:
            assert self.claims is not None  # (made with the helper)
            pickle.dump(_Start(root, heads, manifest, self.claims.fd), self._send)
            self._send.flush()
            self._begun = True
        except Exception:  # noqa: BLE001 - the helper gone (a broken pipe): this process makes every shard
            self.close()

    def start(self, order: _Order) -> bool:
        """Send the helper its order; False when it is not there to take it (then every shard is made here)."""
        if self._send is None or not self._begun:
            self.close()
            return False
        send, self._send = self._send, None
        _HELD.discard(send.fileno())
        try:
            with send:
                pickle.dump(order, send)
        except Exception:  # noqa: BLE001 - the helper gone (a broken pipe): this process makes its shards
            self.close()
            return False
        return True

    def made(self, claimed: set[int]) -> dict[int, int]:
        """The shards the helper said it wrote (number -> bytes), once it has said every shard of `claimed` (those it
        took: it takes no more once this process has reached them all) or ended; then it is ended."""
        said: dict[int, int] = {}
        if self._answers is not None and claimed:
            try:
                for line in self._answers:
                    if line.endswith(b"\n"):  # (a line cut short by a kill says nothing)
                        number, size = line.split()
                        said[int(number)] = int(size)
                    if claimed <= said.keys():
                        break
            except (OSError, ValueError):
                pass
        self.close()
        return said

    def close(self) -> None:
        """End the helper (killed if it is still at work) and reap it."""
        for stream in (self._send, self._answers):
            if stream is not None:
                _HELD.discard(stream.fileno())
        super().close()
        if self.claims is not None:  # (after the helper's end: nothing takes a shard any more)
            self.claims.close()
            self.claims = None


def write_view(store: StoreReader, data: ViewData, title: str, path: Path, helper: DetailsBeside) -> Written:
    """write_page of `data`'s summary and run details, the shards `helper` reaches first made by it when it takes its
    order (it gives them up when the report read other heads than it was told, or left a run out)."""
    check_out(path)  # (before the helper writes a shard there)
    token = page_token(data.head_ids)
    rows = row_index(data)
    helped = helper.start(_Order(data.head_ids, frozenset(rows), path, token))
    claims = helper.claims
    mine = (lambda number: claims.take(number, _Claims.COMMAND)) if helped and claims else (lambda number: True)
    runs = shards = detail_bytes = 0
    summary_rows = data.summary["rows"]
    for number, keys, details in run_shards(store, data.head_ids, data.manifest, rows, SHARD_RUNS, mine):
        for key in keys:
            summary_rows.add_run(key)
            runs += 1
        shards += 1
        if details is not None:
            detail_bytes += write_shard(path, token, number, details)
    if helped and claims:
        theirs = claims.taken(_Claims.HELPER, shards)  # (every shard is taken by now: the helper takes no more)
        said = helper.made(theirs)
        left = {number for number in theirs if number not in said}
        detail_bytes += sum(size for number, size in said.items() if number < shards)
        if left:  # the helper ended before saying them: made here
            for number, _, details in run_shards(store, data.head_ids, data.manifest, rows, SHARD_RUNS,
                                                 left.__contains__):
                if details is not None:
                    detail_bytes += write_shard(path, token, number, details)
    return finish_page(data.summary, title, path, token, Written(0, detail_bytes, shards, runs))


def _helper(requests: int, answers: int) -> None:
    """The forked process: walk the heads it is told, make its shards, and once its order says they are the report's
    (the same heads, a row for every run met), say each as written; exit without running the command's cleanup
    (os._exit: the parent's atexit hooks and buffers are the parent's). When the command's process is gone, it ends at
    its next word: its order's pipe ends (EOF), its answer has no reader (EPIPE)."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:  # its name in ps and top (and how tests find it)
            Path("/proc/self/comm").write_text(HELPER_NAME)
        except OSError:
            pass
        with os.fdopen(requests, "rb") as source:
            try:
                start: _Start = pickle.load(source)
            except EOFError:
                return  # (the command ended, or makes every shard itself)
            gc.disable()  # (the records are acyclic: view_cmd's collector_paused)
            from clawstore.store import Store

            store = Store(start.root, create=False)
            rows = _Rows()
            order: _Order | None = None
            claims = _Claims(start.claims)
            token = page_token(start.heads)
            ahead: list[tuple[int, bytes]] = []  # (made before the order: written once it has come)

            def say(number: int, size: int) -> None:
                sink.write(b"%d %d\n" % (number, size))
                sink.flush()

            def ordered() -> _Order | None:
                """The order, waited for; None when it is not for what was made (then the command makes it all)."""
                told: _Order = pickle.load(source)  # (EOF: the command ended, or makes every shard itself)
                if told.heads != start.heads or told.token != token or not rows.known(told.rows):
                    return None
                for number, body in ahead:
                    say(number, write_shard_body(told.path, number, body))
                ahead.clear()
                return told

            with os.fdopen(answers, "wb") as sink:
                for number, _, details in run_shards(store, start.heads, start.manifest, rows, SHARD_RUNS,
                                                     lambda number: claims.take(number, _Claims.HELPER)):
                    if details is None:
                        continue
                    if order is None and len(ahead) < AHEAD and not select.select([source], [], [], 0)[0]:
                        ahead.append((number, render_shard(token, number, details).encode("ascii")))
                        continue  # (the report is still being built: on with the next)
                    if order is None and (order := ordered()) is None:
                        return
                    say(number, write_shard(order.path, order.token, number, details))
                if order is None and ahead:  # (every shard made before the order came)
                    ordered()
    except BaseException:  # noqa: BLE001 - anything else: the command makes the shards not said
        code = 1
    finally:
        os._exit(code)
