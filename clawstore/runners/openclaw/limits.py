"""What one OpenClaw run may make claw hold: its containers' output and its final workspace.

The agent acts on a model's words and a suite written by someone else, so what it produces is input:
a turn that prints without end, or a workspace with a file of many gigabytes or millions of files,
must fail that run, not exhaust the memory of the build running it beside others.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

MAX_OUTPUT_BYTES = 16 << 20  # per stream (stdout, stderr) of one container run
MAX_WORKSPACE_BYTES = 1 << 30  # all files of the final workspace together
MAX_WORKSPACE_FILES = 100_000  # files, directories and links of the final workspace
MAX_SESSION_FILE_BYTES = 64 << 20  # one of OpenClaw's session transcripts, read whole to be redacted
_CHUNK = 1 << 16


def size_text(count: int) -> str:
    return f"{count >> 20} MiB" if count < (1 << 30) else f"{count >> 30} GiB"


@dataclass
class _Capture:
    """One pipe read to its end: the first `cap` bytes kept, the rest counted and dropped (so the
    process never blocks on a full pipe while it is being stopped)."""

    pipe: IO[bytes]
    cap: int
    overflow: threading.Event
    kept: bytearray = field(default_factory=bytearray)
    over: bool = False

    def read(self) -> None:
        fd = self.pipe.fileno()
        while chunk := os.read(fd, _CHUNK):
            room = self.cap - len(self.kept)
            if len(chunk) > room:
                self.kept += chunk[:max(room, 0)]
                if not self.over:
                    self.over = True
                    self.overflow.set()
            else:
                self.kept += chunk


@dataclass
class Output:
    stdout: bytes
    stderr: bytes
    timed_out: bool
    overflowed: str | None  # "stdout" or "stderr": the stream that passed MAX_OUTPUT_BYTES


def collect_output(proc: subprocess.Popen[bytes], timeout_s: float, stop: Callable[[], None],
                   cap: int = MAX_OUTPUT_BYTES) -> Output:
    """Read a process's stdout and stderr until it ends, at most `cap` bytes of each. On a timeout or
    once a stream passes `cap`, `stop()` is called (it must end the process) and the reading ends."""
    wake = threading.Event()
    captures = [_Capture(proc.stdout, cap, wake), _Capture(proc.stderr, cap, wake)]  # type: ignore[arg-type]
    readers = [threading.Thread(target=c.read, name="claw-openclaw-output", daemon=True) for c in captures]
    for reader in readers:
        reader.start()

    def wait_for_end() -> None:
        proc.wait()
        wake.set()

    threading.Thread(target=wait_for_end, name="claw-openclaw-wait", daemon=True).start()
    timed_out = not wake.wait(timeout_s)
    if timed_out or any(c.over for c in captures):
        stop()
    proc.wait()
    for reader in readers:
        # The pipes end with the process, unless something it started still holds them: then what
        # was read so far is what there is.
        reader.join(timeout=5.0)
    overflowed = next((name for name, c in zip(("stdout", "stderr"), captures, strict=True) if c.over), None)
    return Output(bytes(captures[0].kept), bytes(captures[1].kept), timed_out and overflowed is None, overflowed)


def workspace_problem(directory: Path, max_bytes: int | None = None, max_entries: int | None = None) -> str | None:
    """Why the final workspace is too big to keep (MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES), or None.
    Stops counting at the first limit passed: millions of files cost no more than the limit to look at."""
    max_bytes = MAX_WORKSPACE_BYTES if max_bytes is None else max_bytes
    max_entries = MAX_WORKSPACE_FILES if max_entries is None else max_entries
    total, entries = 0, 0
    pending = [directory]
    while pending:
        try:
            listing = os.scandir(pending.pop())
        except OSError:
            continue
        with listing:
            for entry in listing:
                entries += 1
                if entries > max_entries:
                    return f"it holds more than {max_entries:,} files and directories"
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
                    if total > max_bytes:
                        return f"its files hold more than {size_text(max_bytes)}"
    return None
