"""Reading what a process claw runs for others prints (an OpenClaw container, `exec_shell`, a python hook), in bounded
memory, so that output without end cannot exhaust memory before the timeout. Details: docs/runners.md (Details by
module)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Literal

_CHUNK = 1 << 16
_JOIN_S = 5.0  # for pipes held open by something the process started and left behind


@dataclass
class _Stream:
    pipe: IO[bytes]
    cap: int
    keep: Literal["head", "tail"]
    overflow: threading.Event  # set the first time a head-kept stream passes `cap`
    data: bytearray = field(default_factory=bytearray)
    over: bool = False

    def read(self) -> None:
        fd = self.pipe.fileno()
        while chunk := os.read(fd, _CHUNK):
            if self.keep == "tail":
                self.data += chunk
                if len(self.data) > 2 * self.cap:  # trimmed now and then, not on every chunk
                    del self.data[:-self.cap]
            elif len(self.data) + len(chunk) <= self.cap:
                self.data += chunk
            else:
                self.data += chunk[:max(self.cap - len(self.data), 0)]
                if not self.over:
                    self.over = True
                    self.overflow.set()

    def kept(self) -> bytes:
        return bytes(self.data[-self.cap:] if self.keep == "tail" else self.data)


@dataclass
class Output:
    stdout: bytes
    stderr: bytes
    timed_out: bool
    overflowed: str | None  # "stdout" or "stderr": the first stream kept by its head that passed its cap


def collect(proc: subprocess.Popen[bytes], timeout_s: float, stop: Callable[[], None], *, stdout_cap: int,
            stderr_cap: int, stderr_keep: Literal["head", "tail"] = "head", stop_on_overflow: bool = True,
            stdin: bytes | None = None) -> Output:
    """Feed `stdin` (then close it) and read stdout and stderr until the process ends. `stop()` must end
    the process: it is called on the timeout and, with `stop_on_overflow`, once a stream passes its cap."""
    wake = threading.Event()
    overflow = wake if stop_on_overflow else threading.Event()
    streams = [_Stream(proc.stdout, stdout_cap, "head", overflow),  # type: ignore[arg-type]
               _Stream(proc.stderr, stderr_cap, stderr_keep, overflow)]  # type: ignore[arg-type]
    workers = [threading.Thread(target=stream.read, name="claw-output", daemon=True) for stream in streams]
    if stdin is not None:
        workers.append(threading.Thread(target=_feed, args=(proc, stdin), name="claw-input", daemon=True))
    for worker in workers:
        worker.start()

    def wait_for_end() -> None:  # as communicate(): the process has ended and both pipes are at their end
        proc.wait()
        for worker in workers[:2]:
            worker.join()
        wake.set()

    threading.Thread(target=wait_for_end, name="claw-wait", daemon=True).start()
    timed_out = not wake.wait(timeout_s)
    stopped_for = _first_over(streams) if stop_on_overflow else None
    if timed_out or stopped_for is not None:
        stop()
    proc.wait()
    for worker in workers:
        worker.join(timeout=_JOIN_S)
    for stream, reader in zip(streams, workers, strict=False):
        if not reader.is_alive():  # (one still reading keeps its pipe: closing it under the read is unsafe)
            stream.pipe.close()
    return Output(streams[0].kept(), streams[1].kept(), timed_out and stopped_for is None, _first_over(streams))


def _first_over(streams: list[_Stream]) -> str | None:
    return next((name for name, stream in zip(("stdout", "stderr"), streams, strict=True) if stream.over), None)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The usual `stop`: SIGKILL the process's whole group (it was started with start_new_session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):  # a process that does not read its input
        proc.stdin.write(data)  # type: ignore[union-attr]
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.close()  # type: ignore[union-attr]
