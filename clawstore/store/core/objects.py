"""Objects: content-addressed zstd frames stored as blobs in packs, found through the index.

A put hashes first, so storing something already present costs a hash and a dict lookup. A new
object is appended to this process's pack (or, when large, streamed into a pack of its own) and
becomes visible when its batch commits (batch.py): never before its bytes are durable.
"""

from __future__ import annotations

import contextlib
import functools
import io
import mmap
import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, TypeVar, cast

import blake3
import zstandard

from clawstore.errors import CorruptObjectError, MissingObjectError, StoreError, UsageError
from clawstore.store.core import codec
from clawstore.store.core.batch import (
    DEFAULT_MAX_BATCHES,
    DEFAULT_WINDOW_S,
    PRESENT_NOTED_MAX,
    Batch,
    GroupCommitter,
    Pending,
    commit,
    note_written,
    unwritten_entries,
)
from clawstore.store.core.codec import CHUNK
from clawstore.store.core.edgefile import children_in
from clawstore.store.core.ids import PREFIX, is_oid, oid_hex, parallel_hasher
from clawstore.store.core.index import Loc, list_segments
from clawstore.store.core.layout import StoreLayout
from clawstore.store.core.packfile import BLOB_HEAD_SIZE, KIND_OBJECT, Blob, PackWriter
from clawstore.store.core.runtime import TOUCH_AFTER_S, Runtime, release, runtime_for
from clawstore.values import jsontext
from clawstore.values.canonical import canonical_json

__all__ = ["TOUCH_AFTER_S", "ObjectStore", "ONE_SHOT_MAX"]

_F = TypeVar("_F", bound=Callable[..., Any])
_S = TypeVar("_S", bound="ObjectStore")
_HASH_CHUNK = 4 << 20  # read size of the dedup pre-hash of big files
# Up to this size an object is encoded in one call into the shared pack; larger objects stream into
# a pack of their own (memory stays bounded whatever the size).
ONE_SHOT_MAX = 8 << 20
BULK_READ_MAX = 64 << 20  # content bytes one get_many_bytes call holds at most
# A batch's small objects (a node's: a few KB, naming a few others) wait to be written together, one pwritev a node
# instead of one an object, up to these; bigger ones (a head's parts) are written as they are put, as before: memory
# stays bounded in a batch of many puts (a tree's files, a head).
QUEUED_OBJECT_MAX = 16 << 10  # an object's frame
QUEUED_CHILDREN_MAX = 64  # the ids its content names
QUEUE_MAX_BYTES = 256 << 10
QUEUE_MAX_OBJECTS = 256


def _store_errors(method: _F) -> _F:
    """Turn an unexpected OSError inside the store into a one-line StoreError naming the file."""

    @functools.wraps(method)
    def wrapper(self: ObjectStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise _store_error(self.root, exc) from None

    return wrapper  # type: ignore[return-value]


def _store_error(root: Path, exc: OSError) -> StoreError:
    where = f" ({exc.filename})" if exc.filename else ""
    return StoreError(f"store {root}: {exc.strerror or exc}{where}")


class _Closed:
    """What a closed store's `runtime` is: anything asked of it says the store is closed."""

    def __init__(self, root: Path):
        self.root = root

    def __getattr__(self, name: str) -> Any:
        raise StoreError(f"store {self.root} is closed")


def _digest(oid: str) -> bytes:
    return bytes.fromhex(oid_hex(oid))


class ObjectStore:
    """The object half of the Store: put, get, has, iterate, batch, group commit."""

    def __init__(self, root: Path, level: int = 3, threads: int = 0):
        self.root = root
        self.layout = StoreLayout(root)
        self.tmp_dir = self.layout.tmp
        self.level = level
        self.threads = threads  # zstd worker threads for streamed (large) objects; 0 = in-line
        self.runtime: Runtime = runtime_for(root)
        # Closed or dropped, a Store lets go of its runtime; the last one open on the directory closes it.
        self._release = weakref.finalize(self, release, self.runtime)
        self._release.atexit = False  # (at the process's end runtime._seal_all seals every pack)

    # --- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        """Let go of the store. The last Store open on its directory in this process seals this process's pack
        and closes the pack files and mapped index segments it opened; a Store dropped without close() does the
        same when it is collected. Its objects used afterwards are a StoreError; closing again does nothing."""
        if self._release.alive:
            self.runtime = cast(Runtime, _Closed(self.root))
            self._release()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # --- batches and group commit ---------------------------------------------------------------
    def _batch(self) -> Batch | None:
        return self.runtime.batch()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Puts and action-cache entries inside share one durability barrier; visible at the end.

        Nested batches join the outer one. If the block raises, what it wrote is never indexed.
        Batches are per thread: other threads see the objects only once the batch commits. Inside
        `group_commit()`, the end of a batch hands it to the process's group (see batch.py).
        """
        runtime = self.runtime
        current = runtime.batch()
        if current is None:
            current = runtime.local.batch = Batch()
        current.depth += 1
        try:
            yield
        except BaseException:
            current.depth -= 1
            if current.depth == 0:
                runtime.local.batch = None
            raise
        current.depth -= 1
        if current.depth == 0:
            runtime.local.batch = None
            self._write_queued(current, entries=True)
            self._hand_over(current)

    def _hand_over(self, pending: Pending) -> None:
        group = self.runtime.group
        try:
            if group is not None:
                group.add(pending)
            else:
                self.runtime.shared.commit(pending)
        except OSError as exc:
            raise StoreError(f"cannot write to store {self.root}: {exc.strerror}") from None

    @contextlib.contextmanager
    def group_commit(self, window_s: float = DEFAULT_WINDOW_S,
                     max_batches: int = DEFAULT_MAX_BATCHES) -> Iterator[None]:
        """While open, batches of every thread commit together: once per window or per N batches.

        Results are visible to this process at once, to others after the group commits; leaving the block commits what
        is left. Details: docs/store.md (Details by module)."""
        runtime = self.runtime
        with runtime.group_lock:
            runtime.group_depth += 1
            if runtime.group is None:
                runtime.group = GroupCommitter(runtime, window_s, max_batches)
        failing = False
        try:
            yield
        except BaseException:
            failing = True
            raise
        finally:
            with runtime.group_lock:
                runtime.group_depth -= 1
                group = runtime.group if runtime.group_depth == 0 else None
                if group is not None:
                    runtime.group = None
            try:
                if group is not None:
                    try:
                        group.close()
                    except OSError as exc:
                        raise StoreError(f"cannot write to store {self.root}: {exc.strerror}") from None
                else:
                    self.flush()
            except StoreError:
                if not failing:
                    raise

    def flush(self) -> None:
        """Commit the process's pending group now (no-op outside group mode)."""
        group = self.runtime.group
        if group is not None:
            try:
                group.flush()
            except OSError as exc:
                raise StoreError(f"cannot write to store {self.root}: {exc.strerror}") from None

    def abandon_pending(self) -> None:
        """Give up what the group could not commit (after flush kept failing): nothing of it was ever
        visible; the callbacks waiting for it never run."""
        group = self.runtime.group
        if group is not None:
            group.abandon()

    def flush_batch(self) -> None:
        """Publish everything pending (this thread's batch and the group), e.g. before a ref."""
        current = self._batch()
        if current is not None:
            self._write_queued(current)
            pending = Pending()
            pending.absorb(current)
            current.objects, current.actions, current.writers, current.callbacks = {}, {}, set(), []
            commit(self.runtime, pending)
        self.flush()

    def when_durable(self, callback: Callable[[], None]) -> None:
        """Run `callback` once everything this thread has put so far is durable and visible.

        E.g. release a work claim only after the node's result can be seen by other processes.
        """
        current = self._batch()
        if current is not None:
            current.callbacks.append(callback)
            return
        group = self.runtime.group
        if group is not None:
            group.add_callback(callback)  # never raises: a failing group tells the next writer
            return
        callback()

    # --- locating -------------------------------------------------------------------------------
    def _pending_loc(self, digest: bytes) -> Loc | None:
        current = self._batch()
        if current is not None:
            if digest in current.queued:  # asked where it is (to read it): written now
                self._write_queued(current)
            loc = current.objects.get(digest)
            if loc is not None:
                return loc
        group = self.runtime.group
        return group.find_object(digest) if group is not None else None

    def _loc(self, digest: bytes) -> Loc | None:
        return self._pending_loc(digest) or self.runtime.index.find_object(digest)

    def _existing(self, oid: str) -> tuple[bytes, Loc]:
        digest = _digest(oid)
        loc = self._loc(digest)
        if loc is None:
            raise MissingObjectError(f"object {oid} is not in the store {self.root}")
        return digest, loc

    def _read(self, oid: str, size: int | None = None, start: int = 0) -> tuple[bytes, Loc]:
        """pread from the object's blob; a pack that gc just replaced is looked up again."""
        digest, loc = self._existing(oid)
        try:
            return self.runtime.pread(loc, size, start), loc
        except FileNotFoundError:
            self.runtime.forget_pack(loc[0])
            self.runtime.index.reload()
            digest, loc = self._existing(oid)
            try:
                return self.runtime.pread(loc, size, start), loc
            except FileNotFoundError:
                raise MissingObjectError(f"object {oid} is not in the store {self.root}") from None

    def locate_digest(self, digest: bytes) -> Loc | None:
        """(pack id, offset, length) of the object with this digest, None if absent: for bulk readers
        that hold digests (no id to parse)."""
        return self._loc(digest)

    def locate(self, oid: str) -> Loc:
        """(pack id, offset, length) of the object's frame (MissingObjectError if absent)."""
        return self._existing(oid)[1]

    # --- queries --------------------------------------------------------------------------------
    def has(self, oid: str) -> bool:
        digest = _digest(oid)
        return self._queued(digest) or self._loc(digest) is not None

    def _queued(self, digest: bytes) -> bool:
        """Put in this thread's open batch and not yet written, or found present by a put in it (present for `has`
        and dedup, without a write or a look-up)."""
        current = self._batch()
        return current is not None and (digest in current.queued or digest in current.present)

    def missing(self, oids: Iterable[str]) -> list[str]:
        """Those of `oids` the store does not hold: `has` of each, with one index lookup for the lot
        (planning asks it of every output of every record: a quarter of a million at 10,000 runs)."""
        pairs = [(oid, _digest(oid)) for oid in oids]
        absent = set(self.runtime.index.lacking(digest for _, digest in pairs))
        return [oid for oid, digest in pairs if digest in absent and not self.has(oid)]

    def _present(self, digest: bytes) -> bool:
        """Dedup check for a put: present (pending or indexed)? Refreshes an old pack's mtime. A hit is noted in the
        open batch (`Batch.present`)."""
        if self._queued(digest):
            return True
        found = self._pending_loc(digest) is not None or self._indexed_fresh(digest)
        current = self._batch()
        if found and current is not None and len(current.present) < PRESENT_NOTED_MAX:
            current.present.add(digest)
        return found

    def _indexed_fresh(self, digest: bytes) -> bool:
        index = self.runtime.index
        loc = index.find_object(digest, look_again=False)
        if loc is None:
            return False
        if self.runtime.touch(loc[0]):
            return True
        index.reload()  # its pack was just removed by gc: ask again
        loc = index.find_object(digest)
        return loc is not None and self.runtime.touch(loc[0])

    def has_fresh(self, digest: bytes) -> bool:
        """Present? A hit counts as a use: an old pack's mtime is refreshed, so gc's grace covers it."""
        return self._present(digest)

    def index_segments(self) -> frozenset[str]:
        """The index's segments now: one gone since an earlier look was superseded meanwhile, by a merge or by a gc,
        which may have deleted objects then present."""
        return frozenset(list_segments(self.runtime.index_dir))

    def iter_objects(self) -> Iterator[str]:
        """Every object id the index names (sorted: streamed in digest order from the index's tables)."""
        index = self.runtime.index
        index.refresh()
        for digest in index.objects:
            yield PREFIX + digest.hex()

    def object_digests(self) -> set[bytes]:
        """Every object the index names, as digests (set arithmetic over a whole store)."""
        index = self.runtime.index
        index.refresh()
        return index.object_digests()

    @_store_errors
    def object_sizes(self, oid: str) -> tuple[int, int]:
        """(logical bytes, stored bytes) of an object, read from its frame header."""
        head, loc = self._read(oid, codec.MAX_HEADER)
        logical = codec.content_size(head)
        if logical is None:  # frame without a size: count by decoding (also verifies)
            logical = 0
            with self.open_object(oid) as reader:
                while chunk := reader.read(CHUNK):
                    logical += len(chunk)
        return logical, loc[2]

    def read_frame(self, oid: str) -> bytes:
        """The stored frame of an object, unverified (archives copy frames as they are)."""
        return self._read(oid)[0]

    # --- reads ----------------------------------------------------------------------------------
    @_store_errors
    def get_bytes(self, oid: str) -> bytes:
        frame, loc = self._read(oid)
        return codec.decode_verified(oid, oid_hex(oid), f"pack {loc[0]} at {loc[1]}", frame)

    @_store_errors
    def get_many_bytes(self, oids: Iterable[str], budget: int = BULK_READ_MAX) -> dict[str, bytes]:
        """The contents of those of `oids` the index names, verified, read and decoded in batches for readers of
        thousands (a campaign's records). Whatever is left out (absent, too large, over `budget`, not verifying) the
        caller reads with get_bytes, which says what is wrong. Details: docs/store.md (Details by module)."""
        index = self.runtime.index
        by_pack: dict[str, list[tuple[int, int, bytes, str]]] = {}
        for oid in oids:
            if not is_oid(oid):
                continue
            digest = bytes.fromhex(oid[len(PREFIX):])
            loc = index.find_object(digest, look_again=False)
            if loc is not None:
                by_pack.setdefault(loc[0], []).append((loc[1], loc[2], digest, oid))
        found: dict[str, bytes] = {}
        for pack, frames in by_pack.items():
            try:
                mapped = mmap.mmap(self.runtime.fd(pack), 0, access=mmap.ACCESS_READ)
            except (FileNotFoundError, ValueError):  # removed by gc a moment ago, or empty
                continue
            with mapped:
                spans, chosen, held = [], [], 0
                for offset, length, digest, oid in sorted(frames):
                    size = codec.batch_size(mapped[offset:offset + codec.MAX_HEADER])
                    if not size or offset + length > len(mapped) or size > budget:
                        continue
                    budget -= size
                    spans.append((offset, length))
                    chosen.append((digest, oid))
                    held += size
                decoded = codec.decode_frames(mapped, spans, held) if spans else None
                if decoded is None:
                    continue  # one frame does not decode: all are left to get_bytes, which names it
                for (digest, oid), content in zip(chosen, decoded, strict=True):
                    if blake3.blake3(content).digest() == digest:
                        found[oid] = content.tobytes()
        return found

    @_store_errors
    def open_object(self, oid: str) -> codec.ObjectReader:
        """A streaming reader; reading to the end verifies the object (CorruptObjectError if bad)."""
        _, loc = self._existing(oid)
        try:
            source = BlobFile(self.runtime.fd(loc[0]), loc[1], loc[2])
        except FileNotFoundError:
            self.runtime.index.reload()
            _, loc = self._existing(oid)
            source = BlobFile(self.runtime.fd(loc[0]), loc[1], loc[2])
        return codec.ObjectReader(oid, oid_hex(oid), f"pack {loc[0]} at {loc[1]}", source)

    # --- JSON objects ---------------------------------------------------------------------------
    def put_json(self, value: Any) -> str:
        """Store `canonical_json(value)`; equal values always get the same id."""
        return self.put_bytes(canonical_json(value))

    def get_json(self, oid: str) -> Any:
        """Parse a JSON object (ValueError if the object is not JSON)."""
        return jsontext.loads(self.get_bytes(oid))

    # --- writes ---------------------------------------------------------------------------------
    @_store_errors
    def put_bytes(self, data: bytes | bytearray | memoryview) -> str:
        view = data if isinstance(data, bytes) else memoryview(data).cast("B")
        hasher = parallel_hasher() if len(view) >= CHUNK else blake3.blake3()
        hasher.update(view)
        digest = hasher.digest()
        oid = PREFIX + digest.hex()
        if self._present(digest):
            return oid
        if len(view) > ONE_SHOT_MAX:  # encode in chunks into a pack of its own
            return self._put_stream_from(memoryview(view), len(view), known=digest)[0]
        self._append(digest, codec.encode(view, self.level), children_in(view))
        return oid

    def put_frame(self, digest: bytes, frame: bytes | memoryview) -> bool:
        """Store an already encoded and verified frame (archive import); False if present."""
        if self._present(digest):
            return False
        self._append(digest, [frame])
        return True

    def put_frames(self, frames: list[tuple[bytes, bytes | memoryview]]) -> list[bytes]:
        """put_frame of several frames, written with one system call (a pull's copied objects: one write per
        object cost more than verifying them); the digests of those stored (not present before)."""
        new: dict[bytes, bytes | memoryview] = {}
        for digest, frame in frames:
            if digest not in new and not self._present(digest):
                new[digest] = frame
        if not new:
            return []
        runtime = self.runtime
        with runtime.pack_lock:
            writer = runtime.writer()
            blobs = writer.append_many([(KIND_OBJECT, digest, [frame]) for digest, frame in new.items()])
        for blob in blobs:
            self._stage(blob.id, (writer.pack_id, blob.offset, blob.length), writer)
        return list(new)

    def adopt_blob(self, digest: bytes, blob: Blob, writer: PackWriter) -> bool:
        """Index an object frame already written (and verified) in `writer`'s pack, an import's own;
        False if the store has the object (that copy stays unnamed: gc reclaims it)."""
        if self._present(digest):
            return False
        self._stage(digest, (writer.pack_id, blob.offset, blob.length), writer)
        return True

    def put_frame_file(self, digest: bytes, path: Path) -> bool:
        """Store a verified frame held in a file (migration, archive import); False if present.

        Large frames are copied in chunks into a pack of their own: memory stays bounded.
        """
        if self._present(digest):
            return False
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size <= ONE_SHOT_MAX:
                self._append(digest, [fh.read()])
                return True
            with self._large_blob() as (writer, start):
                for chunk in _read_chunks(fh, _HASH_CHUNK):
                    writer.write_raw(chunk)
                self._publish_large(writer, start, digest)
        return True

    @contextlib.contextmanager
    def _large_blob(self) -> Iterator[tuple[PackWriter, int]]:
        """A pack of its own for one large object (and where its blob starts); gone if writing fails."""
        writer = self.runtime.own_pack()
        try:
            yield writer, writer.begin_stream(KIND_OBJECT)
        except BaseException:
            writer.close()
            with contextlib.suppress(OSError):
                os.unlink(writer.path)
            raise

    def _publish_large(self, writer: PackWriter, start: int, digest: bytes) -> None:
        blob = writer.end_stream(start, KIND_OBJECT, digest)
        writer.seal()
        writer.close()
        self._stage(digest, (writer.pack_id, blob.offset, blob.length), writer)

    def _append(self, digest: bytes, frame: list[bytes | memoryview], children: list[bytes] | None = None) -> None:
        """Append a frame to this process's pack; `children`: what its content names, for the pack's edges file
        (None: not known here, gc reads it). Inside a batch it waits in the batch's queue (`_write_queued`)."""
        current = self._batch()
        if current is not None:
            size = sum(len(part) for part in frame)
            if size <= QUEUED_OBJECT_MAX and len(children or ()) <= QUEUED_CHILDREN_MAX:
                current.queued[digest] = (frame, children)
                current.queued_bytes += size
                if current.queued_bytes > QUEUE_MAX_BYTES or len(current.queued) >= QUEUE_MAX_OBJECTS:
                    self._write_queued(current)
                return
            self._write_queued(current)  # (what was put before it goes first: the pack's order is the puts')
        runtime = self.runtime
        with runtime.pack_lock:
            writer = runtime.writer()
            blob = writer.append(KIND_OBJECT, digest, frame)
            if children is not None and writer.edge_log is not None:
                writer.edge_log.add(digest, blob.offset, children)
        runtime.seal_if_names_many(writer)
        self._stage(digest, (writer.pack_id, blob.offset, blob.length), writer)

    def _write_queued(self, batch: Batch, entries: bool = False) -> None:
        """Append the batch's queued objects to this process's pack with one system call, in the order they were put
        (the pack's bytes are those of one write per object), and record where they are in the batch; `entries`: its
        action entries in the same write (at the batch's end: what the commit would append next)."""
        if not batch.queued:
            return
        queued = batch.queued
        batch.queued, batch.queued_bytes = {}, 0
        todo = unwritten_entries(batch) if entries else []
        runtime = self.runtime
        try:
            with runtime.pack_lock:
                writer = runtime.writer()
                blobs, offsets = writer.append_with_actions(
                    [(KIND_OBJECT, digest, frame) for digest, (frame, _) in queued.items()], todo)
                if writer.edge_log is not None:
                    for blob, (_, children) in zip(blobs, queued.values(), strict=True):
                        if children is not None:
                            writer.edge_log.add(blob.id, blob.offset, children)
        except OSError as exc:
            raise _store_error(self.root, exc) from None
        for blob in blobs:
            batch.objects[blob.id] = (writer.pack_id, blob.offset, blob.length)
        batch.writers.add(writer)
        note_written(batch, todo, writer.pack_id, offsets)
        try:
            runtime.seal_if_names_many(writer)
        except OSError as exc:
            raise _store_error(self.root, exc) from None

    def _stage(self, digest: bytes, loc: Loc, writer: PackWriter) -> None:
        """Record a written blob in the open batch, or commit it alone (durable on return)."""
        current = self._batch()
        pending = current if current is not None else Pending()
        pending.objects[digest] = loc
        pending.writers.add(writer)
        if current is None:
            commit(self.runtime, pending)

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
                hasher = parallel_hasher()
                size = 0
                for chunk in _read_chunks(fh, _HASH_CHUNK):
                    hasher.update(chunk)
                    size += len(chunk)
                digest = hasher.digest()
                if self._present(digest):
                    return PREFIX + digest.hex(), size
                fh.seek(0)
                return self._put_stream_from(fh, size, str(path))
        except OSError as exc:
            if exc.filename != str(path) and exc.filename != path:
                raise
            raise UsageError(f"cannot store {path}: {exc.strerror}") from None

    @_store_errors
    def put_stream(self, reader: BinaryIO) -> str:
        """Store everything `reader` yields (a pipe, a socket...), in bounded memory."""
        buffer = bytearray(ONE_SHOT_MAX + 1)
        filled = _fill(reader, memoryview(buffer))
        if filled <= ONE_SHOT_MAX:
            return self.put_bytes(memoryview(buffer)[:filled])
        return self._put_stream_from(_Prefixed(bytes(buffer), reader), None)[0]

    def _put_stream_from(self, source: memoryview | BinaryIO | _Prefixed, size: int | None,
                         name: str = "data", known: bytes | None = None) -> tuple[str, int]:
        """Hash and encode in one pass into a pack of its own, then publish it under its id.

        `known`: the digest, when the caller already hashed these bytes (in memory, immutable).
        """
        if isinstance(source, memoryview):
            view = source
            chunks: Iterator[memoryview] = (view[i:i + CHUNK] for i in range(0, len(view), CHUNK))
        else:
            chunks = _read_chunks(source)
        try:
            return self._stream_into_own_pack(chunks, size, name, known)
        except _AlreadyStored as present:
            return present.oid, present.size

    def _stream_into_own_pack(self, chunks: Iterator[memoryview], size: int | None, name: str,
                              known: bytes | None) -> tuple[str, int]:
        with self._large_blob() as (writer, start):
            encoder = codec.StreamEncoder(_FrameOut(writer, start), self.level, size,  # type: ignore[arg-type]
                                          self.threads, hash_input=known is None)
            try:
                for chunk in chunks:
                    encoder.write(chunk)
                hexdigest = encoder.finish()
            except zstandard.ZstdError:
                raise StoreError(f"cannot store {name}: it changed while being stored") from None
            digest = known if known is not None else bytes.fromhex(hexdigest)
            if self._present(digest):
                raise _AlreadyStored(PREFIX + digest.hex(), encoder.size)
            self._publish_large(writer, start, digest)
        return PREFIX + digest.hex(), encoder.size


class _AlreadyStored(Exception):
    """A streamed object turned out to be present: its own pack is removed."""

    def __init__(self, oid: str, size: int):
        super().__init__(oid)
        self.oid, self.size = oid, size


class _FrameOut:
    """File-like view of a blob being streamed into a pack (the encoder may patch its header)."""

    def __init__(self, writer: PackWriter, start: int):
        self._writer = writer
        self._base = start + BLOB_HEAD_SIZE
        self._pos = 0

    def write(self, data: bytes | memoryview) -> int:
        end = self._writer.size - self._base
        if self._pos == end:
            self._writer.write_raw(data)
        else:
            os.pwrite(self._writer.fd, data, self._base + self._pos)
        self._pos += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._pos = offset if whence == os.SEEK_SET else self._writer.size - self._base + offset
        return self._pos


def check_blob(fd: int, oid: str, offset: int, length: int, where: str) -> None:
    """Read an object's frame in a pack (`fd`) to its end through a verifying reader, in chunks:
    CorruptObjectError if it does not decode to content with its id."""
    with codec.ObjectReader(oid, oid_hex(oid), where, BlobFile(fd, offset, length)) as reader:
        while reader.read(codec.CHUNK):
            pass


class BlobFile(io.RawIOBase):
    """A read-only file over one blob's payload inside a pack (positional reads).

    It reads through a duplicate of the store's descriptor, closed with it: a reader outlives the store's
    handle table (an evicted handle, a closed or dropped Store) without reading whatever file reuses the number."""

    def __init__(self, fd: int, offset: int, length: int):
        super().__init__()
        self._fd, self._offset, self._length, self._pos = os.dup(fd), offset, length, 0

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), self._length - self._pos)
        if want <= 0:
            return 0
        data = os.pread(self._fd, want, self._offset + self._pos)
        if not data:
            raise CorruptObjectError("pack ends before the blob does")
        memoryview(buffer)[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._pos = offset if whence == os.SEEK_SET else (self._pos if whence == os.SEEK_CUR else self._length) + offset
        return self._pos


class _Prefixed:
    """A reader that first yields `head`, then the rest of `tail`."""

    def __init__(self, head: bytes, tail: BinaryIO):
        self._head: bytes | None = head
        self._tail = tail

    def readinto(self, buffer: memoryview) -> int:
        if self._head is not None:
            head = self._head
            count = min(len(head), len(buffer))
            buffer[:count] = head[:count]
            self._head = head[count:] or None
            return count
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

