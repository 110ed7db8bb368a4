"""What `claw push` and `claw pull` show while packs move (bytes, packs, speed, what comes next), so that a transfer of
minutes never looks hung. Details: docs/remote.md (Details by module)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

EVERY_S = 5.0  # plain: seconds between progress lines
MODES = ["auto", "live", "plain", "none"]  # `--progress` of push and pull


class TransferStopped(Exception):
    """Raised in a transfer thread by the callback of a stopped transfer: the file in flight is abandoned."""


class TransferProgress:
    """Counts a transfer (thread-safe) and shows nothing; the displays below override `_show`. Every
    backend reports to it as bytes move, so it is also where a transfer is stopped (`stop`)."""

    def __init__(self, verb: str = "", where: str = ""):
        self.verb, self.where = verb, where  # "pulling", "from s3://team/x"
        self.total_bytes = self.done_bytes = 0
        self.total_packs = self.done_packs = 0
        self.step = ""  # what the transfer does once the bytes are there
        self._stopped = False
        self._lock = threading.Lock()

    def plan(self, packs: int, nbytes: int) -> None:
        """`packs` more packs of `nbytes` in all will move (bytes move again: no step for now)."""
        with self._lock:
            self.total_packs += packs
            self.total_bytes += nbytes
            self.step = ""
            self._show()

    def advance(self, nbytes: int) -> None:
        """`nbytes` more have moved (a backend's callback, from any thread)."""
        if self._stopped:
            raise TransferStopped
        with self._lock:
            self.done_bytes += nbytes
            self._show()

    def stop(self) -> None:
        """Abandon the transfers in flight at their next chunk (the command was interrupted): a big pack
        over a slow link would otherwise hold the interrupted process until its last byte. (Not S3's
        uploads: botocore goes on with them, Backend.upload_stops_at_callback.)"""
        self._stopped = True

    @property
    def stopped(self) -> bool:
        return self._stopped

    def pack_done(self) -> None:
        with self._lock:
            self.done_packs += 1
            self._show()

    def then(self, step: str) -> None:
        """What the transfer does now that its bytes are there ("checking the entries")."""
        with self._lock:
            self.step = step
            self._show(stepped=True)

    def close(self) -> None:
        pass

    def _show(self, stepped: bool = False) -> None:
        pass


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f} MB"  # (decimal, as rich's columns show them)


class PlainTransferProgress(TransferProgress):
    """Lines for logs: where to at once, the counts every EVERY_S seconds while bytes move, each step."""

    def __init__(self, stream: TextIO, verb: str, where: str, clock: Callable[[], float] = time.monotonic):
        super().__init__(verb, where)
        self.stream, self.clock = stream, clock
        self.started = self.last = clock()
        self._print(f"{verb} {where}")

    def _show(self, stepped: bool = False) -> None:
        now = self.clock()
        if stepped:
            self._print(f"  {self.step}")
        elif now - self.last >= EVERY_S:
            share = 100 * self.done_bytes / self.total_bytes if self.total_bytes else 100.0
            speed = self.done_bytes / max(now - self.started, 1e-9)
            self.last = now
            self._print(f"  {_mb(self.done_bytes)} of {_mb(self.total_bytes)} ({share:.0f}%), "
                        f"{self.done_packs} of {self.total_packs} pack(s), {_mb(speed)}/s")

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


class LiveTransferProgress(TransferProgress):
    """One rich bar on a terminal: bytes, speed, time left; the step once the bytes are there."""

    def __init__(self, stream: TextIO, verb: str, where: str, console: Any = None):
        super().__init__(verb, where)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TextColumn("{task.fields[packs]}"), TransferSpeedColumn(), TimeRemainingColumn(),
                                 console=console or Console(file=stream), transient=True)
        self.task = self.progress.add_task(f"{verb} {where}", total=None, packs="")
        self.progress.start()

    def _show(self, stepped: bool = False) -> None:
        description = self.step or f"{self.verb} {self.where}"
        self.progress.update(self.task, description=description, total=self.total_bytes or None,
                             completed=self.done_bytes, packs=f"{self.done_packs}/{self.total_packs} packs")

    def close(self) -> None:
        self.progress.stop()


def open_transfer_progress(mode: str, stream: TextIO, verb: str, where: str) -> TransferProgress:
    """The display `--progress MODE` asks for (`auto`: live on a terminal, else none)."""
    if mode == "auto":
        from clawstore.builder.progress_choice import display_mode

        mode = "live" if display_mode("auto", stream) == "live" else "none"
    if mode == "live":
        return LiveTransferProgress(stream, verb, where)
    if mode == "plain":
        return PlainTransferProgress(stream, verb, where)
    return TransferProgress(verb, where)
