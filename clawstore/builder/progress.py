"""Build progress on stderr: one live line on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None, quiet: bool = False):
        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.quiet = quiet
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def step(self, what: str, status: str, ok: bool) -> None:
        with self._lock:
            self.done += 1
            self.failed += 0 if ok else 1
            if self.quiet:
                return
            elapsed = time.monotonic() - self.started
            line = f"[{self.label} {self.done}/{self.total}] {what}: {status}"
            if self.live:
                summary = f"{self.label}: {self.done}/{self.total} done, {self.failed} failed, {elapsed:.0f}s"
                self.stream.write("\r\033[K" + (line if not ok else summary))
                if not ok:
                    self.stream.write("\n")
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.live and not self.quiet and self.total:
            self.stream.write("\n")
            self.stream.flush()
