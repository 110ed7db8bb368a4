"""Checking archive members against their ids, on a second thread.

Reading the archive (and copying frames into the store's staging files) and decompressing + hashing
them are independent: a worker thread does the latter, fed through a bounded queue, so the two overlap
(zstd and BLAKE3 release the GIL). Memory stays bounded by the queue, whatever the object sizes.
"""

from __future__ import annotations

import queue
import threading

import blake3
import zstandard

from clawstore.errors import UsageError
from clawstore.store.ids import PREFIX

_QUEUE_CHUNKS = 32  # at most this many chunks (1 MiB each) wait for the worker
_WRITE_SIZE = 1 << 20  # decompressed output is hashed in pieces of at most this size


class ObjectCheckError(UsageError):
    """A member's frame is undecodable or its content does not hash to its name."""


class _ContentCheck:
    """Decompresses one frame as it streams by (bounded output pieces) and hashes the content."""

    def __init__(self, hexdigest: str) -> None:
        self.hexdigest = hexdigest
        self.hasher = blake3.blake3()
        self._writer = zstandard.ZstdDecompressor().stream_writer(self, write_size=_WRITE_SIZE)

    def write(self, data: bytes) -> int:  # called by the decompressor with content bytes
        self.hasher.update(data)
        return len(data)

    def feed(self, frame_bytes: bytes) -> None:
        self._writer.write(frame_bytes)

    def problem(self) -> str | None:
        self._writer.flush()
        if self.hasher.hexdigest() != self.hexdigest:
            return "content does not match its id"
        return None


class Verifier:
    """`start(hex)`, `feed(bytes)`..., `end()` per object, in order; `finish()` raises the first problem."""

    def __init__(self, where: str):
        self._where = where
        self._queue: queue.Queue[tuple[str, object] | None] = queue.Queue(maxsize=_QUEUE_CHUNKS)
        self._error: ObjectCheckError | None = None
        self._thread = threading.Thread(target=self._run, name="archive-verify", daemon=True)
        self._thread.start()
        self.checked = 0

    def _fail(self, hexdigest: str, why: str) -> None:
        if self._error is None:
            self._error = ObjectCheckError(f"{self._where}: object {PREFIX}{hexdigest} is damaged ({why})")

    def _run(self) -> None:
        check: _ContentCheck | None = None
        while (item := self._queue.get()) is not None:
            op, arg = item
            if self._error is not None:
                continue  # drain: one problem is enough
            try:
                if op == "start":
                    check = _ContentCheck(str(arg))
                elif op == "data":
                    check.feed(arg)  # type: ignore[union-attr, arg-type]
                else:
                    why = check.problem()  # type: ignore[union-attr]
                    if why:
                        self._fail(check.hexdigest, why)  # type: ignore[union-attr]
                    self.checked += 1
            except zstandard.ZstdError:
                self._fail(check.hexdigest if check else "?", "undecodable")

    def _put(self, item: tuple[str, object]) -> None:
        if self._error is not None:
            raise self._error  # stop reading early: the archive is already known to be bad
        self._queue.put(item)

    def start(self, hexdigest: str) -> None:
        self._put(("start", hexdigest))

    def feed(self, data: bytes) -> None:
        self._put(("data", data))

    def end(self) -> None:
        self._put(("end", None))

    def finish(self) -> None:
        """Wait until every object queued so far is checked; raise the first problem found."""
        self.close()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
