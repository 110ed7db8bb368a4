"""Objects: content-addressed, zstd-framed files under `objects/<2 hex>/<62 hex>`.

A put hashes first, so storing something already present costs a hash and a stat. A new object is
encoded into a temp file under `tmp/`, made durable, then renamed into place and its directory
synced: a crash leaves at most a temp file, never a partial object.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import blake3
import zstandard

from clawstore.errors import MissingObjectError, StoreError, UsageError
from clawstore.store import codec
from clawstore.store.batch import Batch, PendingObject
from clawstore.store.codec import CHUNK
from clawstore.store.durable import fsync_path, temp_name
from clawstore.store.ids import PREFIX, is_hex64, oid_hex

# A dedup hit refreshes the object's mtime when older than this, so gc's grace period (which looks
# at mtimes) also covers objects a running build reused rather than wrote.
TOUCH_AFTER_S = 600.0
OBJECT_MODE = 0o444
_F = TypeVar("_F", bound=Callable[..., Any])  # objects never change: read-only guards against accidental edits


_HASH_CHUNK = 4 << 20  # read size of the dedup pre-hash of big files
# Up to this size an object is encoded in one call (faster than streaming); the encoded copy is the
# only extra memory, far below the 64 MiB bound. Larger objects always stream.
ONE_SHOT_MAX = 8 << 20


def _store_errors(method: _F) -> _F:
    """Turn an unexpected OSError inside the store into a one-line StoreError naming the file."""

    @functools.wraps(method)
    def wrapper(self: ObjectStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise StoreError(f"store {self.root}: {exc.strerror or exc}{where}") from None

    return wrapper  # type: ignore[return-value]


class ObjectStore:
    """The object half of the Store: put, get, has, iterate, batch."""

    def __init__(self, root: Path, level: int = 3, threads: int = 0):
        self.root = root
        self.objects_dir = root / "objects"
        self.tmp_dir = root / "tmp"
        self.level = level
        self.threads = threads  # zstd worker threads for streamed (large) objects; 0 = in-line
        self._local = threading.local()

    # --- paths --------------------------------------------------------------------------------
    def object_path(self, oid: str) -> Path:
        hexdigest = oid_hex(oid)
        return self.objects_dir / hexdigest[:2] / hexdigest[2:]

    def _path_of_hex(self, hexdigest: str) -> Path:
        return self.objects_dir / hexdigest[:2] / hexdigest[2:]

    # --- batches ------------------------------------------------------------------------------
    def _batch(self) -> Batch | None:
        return getattr(self._local, "batch", None)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Puts (and action-cache entries) inside share flushes; all become visible at the end.

        Nested batches join the outer one. If the block raises, pending objects are discarded.
        Batches are per thread: other threads see the objects only once the batch commits.
        """
        current = self._batch()
        if current is None:
            current = self._local.batch = Batch(self.tmp_dir)
        current.depth += 1
        try:
            yield
        except BaseException:
            current.depth -= 1
            if current.depth == 0:
                self._local.batch = None
                current.abort()
            raise
        current.depth -= 1
        if current.depth == 0:
            self._local.batch = None
            try:
                current.commit(with_pointers=True)
            except OSError as exc:
                current.abort()
                raise StoreError(f"cannot write to store {self.root}: {exc.strerror}") from None

    def flush_batch(self) -> None:
        """Publish the current batch's objects now (e.g. before a ref must point at them)."""
        current = self._batch()
        if current is not None:
            current.commit(with_pointers=True)

    def queue_pointer(self, path: Path, body: bytes) -> bool:
        """Inside a batch, defer a small pointer file until the batch's objects are durable."""
        current = self._batch()
        if current is None:
            return False
        current.pointers[path] = body
        return True

    # --- queries ------------------------------------------------------------------------------
    def has(self, oid: str) -> bool:
        hexdigest = oid_hex(oid)
        current = self._batch()
        if current is not None and oid in current.objects:
            return True
        return self._path_of_hex(hexdigest).exists()

    def _present(self, oid: str, path: Path) -> bool:
        """Dedup check for a put: present (in the store or this batch)? Refresh an old mtime."""
        current = self._batch()
        if current is not None and oid in current.objects:
            return True
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return False
        if stat.st_mtime < time.time() - TOUCH_AFTER_S:
            with contextlib.suppress(OSError):
                os.utime(path)
        return True

    def iter_objects(self) -> Iterator[str]:
        """Every object id in the store (shard order; not sorted within a shard)."""
        for shard in sorted(os.listdir(self.objects_dir)):
            if len(shard) != 2:
                continue
            with os.scandir(self.objects_dir / shard) as entries:
                for entry in entries:
                    name = shard + entry.name
                    if len(name) == 64 and is_hex64(name):
                        yield PREFIX + name

    @_store_errors
    def object_sizes(self, oid: str) -> tuple[int, int]:
        """(logical bytes, stored bytes) of an object, read from its frame header."""
        path = self._existing_path(oid)
        with open(path, "rb") as fh:
            stored = os.fstat(fh.fileno()).st_size
            logical = codec.content_size(fh.read(codec.MAX_HEADER))
        if logical is None:  # frame without a size: count by decoding (also verifies)
            logical = 0
            with self.open_object(oid) as reader:
                while chunk := reader.read(codec.CHUNK):
                    logical += len(chunk)
        return logical, stored

    # --- reads --------------------------------------------------------------------------------
    def _existing_path(self, oid: str) -> Path:
        hexdigest = oid_hex(oid)
        current = self._batch()
        if current is not None and oid in current.objects:
            return current.objects[oid].tmp
        path = self._path_of_hex(hexdigest)
        if not path.exists():
            raise MissingObjectError(f"object {oid} is not in the store {self.root}")
        return path

    @_store_errors
    def get_bytes(self, oid: str) -> bytes:
        path = self._existing_path(oid)
        try:
            with open(path, "rb") as fh:
                frame = fh.read()
        except FileNotFoundError:  # removed between the check and the open (gc, repair)
            raise MissingObjectError(f"object {oid} is not in the store {self.root}") from None
        return codec.decode_verified(oid, oid_hex(oid), str(path), frame)

    @_store_errors
    def open_object(self, oid: str) -> codec.ObjectReader:
        """A streaming reader; reading to the end verifies the object (CorruptObjectError if bad)."""
        path = self._existing_path(oid)
        try:
            return codec.ObjectReader(oid, oid_hex(oid), str(path))
        except FileNotFoundError:
            raise MissingObjectError(f"object {oid} is not in the store {self.root}") from None

    # --- writes -------------------------------------------------------------------------------
    @_store_errors
    def put_bytes(self, data: bytes | bytearray | memoryview) -> str:
        view = data if isinstance(data, bytes) else memoryview(data).cast("B")
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO) if len(view) >= CHUNK else blake3.blake3()
        hasher.update(view)
        hexdigest = hasher.hexdigest()
        oid = PREFIX + hexdigest
        final = self._path_of_hex(hexdigest)
        if self._present(oid, final):
            return oid
        if len(view) > ONE_SHOT_MAX:  # encode in chunks: no second full-size buffer
            return self._put_stream_from(memoryview(view), len(view), known=hexdigest)[0]
        self._write_object(oid, final, codec.encode(view, self.level))
        return oid

    def put_file(self, path: Path | str) -> str:
        """Store a file's bytes, streaming: memory stays bounded whatever the file size."""
        return self.put_file_sized(path)[0]

    @_store_errors
    def put_file_sized(self, path: Path | str) -> tuple[str, int]:
        """put_file, also returning the number of bytes stored (what was read, not a stat)."""
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size <= ONE_SHOT_MAX:
                    data = fh.read()
                    return self.put_bytes(data), len(data)
                # Hash first (fast, all cores): a file already stored costs no compression at all.
                hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
                size = 0
                for chunk in _read_chunks(fh, _HASH_CHUNK):
                    hasher.update(chunk)
                    size += len(chunk)
                oid = PREFIX + hasher.hexdigest()
                if self._present(oid, self._path_of_hex(oid[len(PREFIX):])):
                    return oid, size
                fh.seek(0)
                return self._put_stream_from(fh, size, str(path))
        except OSError as exc:
            if exc.filename != str(path) and exc.filename != path:
                raise
            raise UsageError(f"cannot store {path}: {exc.strerror}") from None

    @_store_errors
    def put_stream(self, reader: BinaryIO) -> str:
        """Store everything `reader` yields (a pipe, a socket...), in bounded memory."""
        buffer = bytearray(codec.CHUNK)
        filled = _fill(reader, memoryview(buffer))
        if filled < codec.CHUNK:
            return self.put_bytes(bytes(buffer[:filled]))
        return self._put_stream_from(_Prefixed(bytes(buffer), reader), None)[0]

    def _put_stream_from(self, source: memoryview | BinaryIO | _Prefixed, size: int | None,
                         name: str = "data", known: str | None = None) -> tuple[str, int]:
        """Hash and encode in one pass into a temp file, then publish under the resulting id.

        `known`: the hex digest, when the caller already hashed these bytes (in memory, immutable).
        """
        if isinstance(source, memoryview):
            view = source
            chunks: Iterator[memoryview] = (view[i:i + codec.CHUNK] for i in range(0, len(view), codec.CHUNK))
        else:
            chunks = _read_chunks(source)
        tmp = self.tmp_dir / temp_name()
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, OBJECT_MODE)
        try:
            with open(fd, "r+b", buffering=0, closefd=False) as out:
                encoder = codec.StreamEncoder(out, self.level, size, self.threads,  # type: ignore[arg-type]
                                              hash_input=known is None)
                try:
                    for chunk in chunks:
                        encoder.write(chunk)
                    hexdigest = encoder.finish()
                    if known is not None:
                        hexdigest = known
                except zstandard.ZstdError:
                    raise StoreError(f"cannot store {name}: it changed while being stored") from None
            oid = PREFIX + hexdigest
            final = self._path_of_hex(hexdigest)
            if self._present(oid, final):
                os.close(fd)
                os.unlink(tmp)
                return oid, encoder.size
            self._publish(oid, fd, tmp, final)
            return oid, encoder.size
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _write_object(self, oid: str, final: Path, frame: list[bytes | memoryview]) -> None:
        tmp = self.tmp_dir / temp_name()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, OBJECT_MODE)
        except OSError as exc:
            raise StoreError(f"cannot write to store {self.root}: {exc.strerror}") from None
        try:
            _write_all(fd, frame)
            self._publish(oid, fd, tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _publish(self, oid: str, fd: int, tmp: Path, final: Path) -> None:
        """Make a finished temp file visible as `final`: now, or at the batch's commit.

        Owns `fd` from here on (closes it, or hands it to the batch).
        """
        current = self._batch()
        if current is not None:
            current.add_object(oid, PendingObject(fd, tmp, final, os.fstat(fd).st_size))
            if current.needs_flush():
                current.commit(with_pointers=False)
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.rename(tmp, final)
        except FileNotFoundError:  # the shard directory was removed by hand: recreate it
            final.parent.mkdir(parents=True, exist_ok=True)
            fsync_path(final.parent.parent)
            os.rename(tmp, final)
        fsync_path(final.parent)


class _Prefixed:
    """A reader that first yields `head`, then the rest of `tail`."""

    def __init__(self, head: bytes, tail: BinaryIO):
        self._head: bytes | None = head
        self._tail = tail

    def readinto(self, buffer: memoryview) -> int:
        if self._head is not None:
            head, self._head = self._head, None
            buffer[:len(head)] = head
            return len(head)
        return _fill(self._tail, buffer)


def _fill(reader: BinaryIO | _Prefixed, buffer: memoryview) -> int:
    """Read until `buffer` is full or EOF (pipes return short reads)."""
    total = 0
    while total < len(buffer):
        count = reader.readinto(buffer[total:])  # type: ignore[union-attr]
        if not count:
            break
        total += count
    return total


def _read_chunks(reader: BinaryIO | _Prefixed, size: int = codec.CHUNK) -> Iterator[memoryview]:
    """Successive chunks of `reader` in one reused buffer (consume each before the next)."""
    buffer = memoryview(bytearray(size))
    while count := _fill(reader, buffer):
        yield buffer[:count]
        if count < len(buffer):
            break


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    """Write buffers in order with writev (short writes resumed)."""
    views = [memoryview(part).cast("B") for part in parts if len(part)]
    while views:
        written = os.writev(fd, views[:1024])
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if written:
            views[0] = views[0][written:]
