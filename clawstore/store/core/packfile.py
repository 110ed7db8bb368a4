"""Pack files: immutable, self-describing files of blobs (object frames and action-cache entries).

Byte layout and sealing: docs/store.md (Packs)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import add, itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import blake3

from clawstore.errors import StoreError, UsageError
from clawstore.store.core import columns
from clawstore.store.core.edgefile import EdgeLog, Table, pack_digest, write
from clawstore.store.core.layout import StoreLayout

MAGIC = b"CLAWPACK"
VERSION = 1
HEADER = MAGIC + bytes([VERSION]) + bytes(7)
END_MAGIC = b"CLAWPEND"
KIND_OBJECT = 1
KIND_ACTION = 2
KIND_TRAILER = 0xFF
_BLOB_KINDS = bytes([KIND_OBJECT, KIND_ACTION])  # the kinds a table's rows may name
_BLOB_HEAD = struct.Struct("<B32sQ")  # kind, id, payload length
_TABLE_ROW = struct.Struct("<B32sQQ")  # kind, id, payload offset, payload length
_FOOTER = struct.Struct("<Q32s8s")  # count, BLAKE3 of the table, END_MAGIC
_ACTION = struct.Struct("<32sq")  # record digest, time ns
_ID = struct.Struct("32s")
BLOB_HEAD_SIZE = _BLOB_HEAD.size
_HEAD_BYTES = struct.Struct(f"{BLOB_HEAD_SIZE}s")  # a blob head as one bytes field
TABLE_ROW_SIZE = _TABLE_ROW.size
ACTION_SIZE = _ACTION.size
NO_RECORD = bytes(32)
SUFFIX = ".pack"
MAX_PAYLOAD = 1 << 40  # refuse absurd lengths in a hostile file before allocating
# A pack smaller than this is not worth a file of its own: gc merges such packs, and a pull copies their
# objects into its own pack instead of moving them in whole (one per interim push of a `build --remote`).
SMALL_PACK_BYTES = 4 << 20


class NotAPackError(StoreError):
    """A file under packs/ that is not a pack (wrong magic, unknown version, bad table)."""


class PackCheckError(UsageError):
    """A received pack is not what its name and listing say (exit 2: nothing of it became visible)."""


class Blob(NamedTuple):  # a tuple: a pack's table makes one per blob, and a tuple is made fastest
    kind: int
    id: bytes  # 32-byte digest
    offset: int  # of the payload
    length: int


def new_pack_id() -> str:
    return os.urandom(16).hex()


def pack_path(packs_dir: Path, pack_id: str) -> Path:
    return packs_dir / (pack_id + SUFFIX)


def encode_action(record: bytes | None, time_ns: int) -> bytes:
    return _ACTION.pack(record or NO_RECORD, time_ns)


def decode_action(payload: bytes) -> tuple[bytes | None, int]:
    record, time_ns = _ACTION.unpack(payload)
    return (None if record == NO_RECORD else record), time_ns


class PackWriter:
    """Appends blobs to one new pack file; holds a flock on it so others know its writer lives. With `edges_root`
    (a store's root), what the objects noted in `edge_log` name is written beside the pack when it is sealed."""

    def __init__(self, packs_dir: Path, pack_id: str | None = None, edges_root: Path | None = None):
        self.pack_id = pack_id or new_pack_id()
        self.edges_root = edges_root
        self.edge_log = EdgeLog() if edges_root is not None else None
        self.path = pack_path(packs_dir, self.pack_id)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        self.size = 0
        # Its table of contents as the trailer holds it (_TABLE_ROW after row): 49 bytes a blob, where a Blob
        # tuple and its two ints took about 150 (a pack holds up to ~100,000 small blobs).
        self.table = bytearray()
        self.synced_to = 0  # bytes known durable
        self.sealed = False
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            self._write([HEADER])
        except BaseException:  # (no writer object to close it: its flock would say a writer lives until exit)
            self.close()
            raise

    @property
    def blobs(self) -> int:
        """How many blobs (objects and action entries) the pack holds so far."""
        return len(self.table) // _TABLE_ROW.size

    @classmethod
    def reopen(cls, path: Path, fd: int, blobs: list[Blob], end: int | None) -> PackWriter:
        """A dead writer's pack opened read-write and flocked (`fd`) to be sealed: its torn end (past
        `end`, the end of its last whole blob) is cut first."""
        writer = cls.__new__(cls)
        writer.pack_id, writer.path, writer.fd = path.name[:-len(SUFFIX)], path, fd
        writer.size = len(HEADER) if end is None else end
        os.ftruncate(fd, writer.size)
        writer.table = bytearray(b"".join(_TABLE_ROW.pack(*blob) for blob in blobs))
        writer.synced_to, writer.sealed = 0, False
        writer.edges_root, writer.edge_log = None, None
        return writer

    def _write(self, parts: list[bytes | memoryview]) -> None:
        total = sum(map(len, parts))
        if len(parts) > 1024:  # many small parts (a commit's entries): one buffer, one system call
            parts = [b"".join(parts)]
        written = os.pwritev(self.fd, parts, self.size)
        if written < total:  # a short write (rare on regular files): resume in order
            self._write_rest(parts, written)
        self.size += total

    def _write_rest(self, parts: list[bytes | memoryview], done: int) -> None:
        """Write what a short write left: the first `done` bytes of `parts` are written."""
        views = [memoryview(part).cast("B") for part in parts if len(part)]
        offset, first = self.size + done, 0
        while True:
            while first < len(views) and done >= len(views[first]):
                done -= len(views[first])
                first += 1
            if first == len(views):
                return
            if done:
                views[first] = views[first][done:]
            done = os.pwritev(self.fd, views[first:first + 1024], offset)
            offset += done

    def append(self, kind: int, blob_id: bytes, payload: list[bytes | memoryview]) -> Blob:
        """Write one blob (its payload in parts); returns where its payload is. Not durable until `sync`."""
        return self.append_many([(kind, blob_id, payload)])[0]

    def append_many(self, blobs: list[tuple[int, bytes, list[bytes | memoryview]]]) -> list[Blob]:
        """Write several blobs (kind, id, payload parts) with one system call; where their payloads are."""
        return self.append_with_actions(blobs, ())[0]

    def append_with_actions(self, blobs: list[tuple[int, bytes, list[bytes | memoryview]]],
                            entries: Sequence[tuple[bytes, bytes | None, int]]) -> tuple[list[Blob], list[int]]:
        """`append_many(blobs)` then `append_actions(entries)`, the same bytes, with one system call (a node's
        objects and its cache entry); where the blobs' and the entries' payloads are."""
        parts: list[bytes | memoryview] = []
        written: list[Blob] = []
        offset = self.size
        for kind, blob_id, payload in blobs:
            length = sum(len(part) for part in payload)
            written.append(Blob(kind, blob_id, offset + BLOB_HEAD_SIZE, length))
            parts += (_BLOB_HEAD.pack(kind, blob_id, length), *payload)
            offset += BLOB_HEAD_SIZE + length
        table = b"".join(_TABLE_ROW.pack(*blob) for blob in written)
        offsets: range = range(0)
        if entries:
            blob, rows, offsets = _action_blobs(entries, offset)
            parts.append(blob)
            table += rows
        self._write(parts)
        self.table += table
        return written, list(offsets)

    def append_objects(self, ids: Sequence[bytes], frames: Sequence[bytes | memoryview]) -> list[int]:
        """Write object blobs (each id's frame, one part each) as `append_many` writes them, byte for byte, with their
        heads and table rows made a column at a time (a push copies tens of thousands of frames into each pack it
        makes: a struct call and a Blob per object cost more than copying its frame); where their payloads are."""
        n = len(ids)
        if not n:
            return []
        lengths = list(map(len, frames))
        kinds, lengths_column = bytes([KIND_OBJECT]) * n, columns.column("Q", lengths)
        heads = columns.rows(BLOB_HEAD_SIZE, n, kinds, b"".join(ids), lengths_column)
        parts: list[bytes | memoryview] = [b""] * (2 * n)
        parts[0::2] = map(itemgetter(0), _HEAD_BYTES.iter_unpack(heads))  # (each head cut in C, not a slice a step)
        parts[1::2] = frames
        offsets = list(accumulate(map(add, lengths[:-1], repeat(BLOB_HEAD_SIZE)), initial=self.size + BLOB_HEAD_SIZE))
        self._write(parts)
        self.table += columns.rows(_TABLE_ROW.size, n, kinds, b"".join(ids), columns.column("Q", offsets),
                                   lengths_column)
        return offsets

    def append_actions(self, entries: Sequence[tuple[bytes, bytes | None, int]]) -> list[int]:
        """Write action-cache entries (key, record or None, time ns) as `append_many` writes their blobs, byte for byte,
        with their heads, payloads and table rows made a column at a time (a pull sets tens of thousands at once: one
        struct call per part cost more than checking them); where their payloads are."""
        if not entries:
            return []
        blob, rows, offsets = _action_blobs(entries, self.size)
        self._write([blob])
        self.table += rows
        return list(offsets)

    def begin_stream(self, kind: int) -> int:
        """Reserve a blob header for a payload written with `write_raw`; returns the header offset."""
        start = self.size
        self._write([_BLOB_HEAD.pack(0, bytes(32), 0)])  # kind 0 until filled in: a walk stops here
        return start

    def write_raw(self, data: bytes | memoryview) -> None:
        self._write([data])

    def end_stream(self, start: int, kind: int, blob_id: bytes) -> Blob:
        """Fill in the reserved header once the payload (and so its id and length) is known."""
        length = self.size - start - BLOB_HEAD_SIZE
        os.pwrite(self.fd, _BLOB_HEAD.pack(kind, blob_id, length), start)
        blob = Blob(kind, blob_id, start + BLOB_HEAD_SIZE, length)
        self.table += _TABLE_ROW.pack(*blob)
        return blob

    def sync(self, end: int | None = None) -> None:
        """Make the pack durable up to `end` (its size when the caller held the pack lock; default: now)."""
        end = self.size if end is None else end
        if self.synced_to < end:
            os.fsync(self.fd)
            self.synced_to = max(self.synced_to, end)

    def seal(self, durable: bool = True) -> None:
        """Append the trailer (the pack's own table of contents) and make the whole pack durable (unless not
        `durable`: a pack made to be sent and deleted, which no crash can leave half-named)."""
        if self.sealed:
            return
        before = os.fstat(self.fd)
        # The table written from a view, not a bytes copy held while the edges file is made (4.9 MB at 100,000 blobs);
        # the view released here, even on a failed write, so the table can still grow.
        with memoryview(self.table) as table:
            footer = _FOOTER.pack(len(table) // _TABLE_ROW.size, blake3.blake3(table).digest(), END_MAGIC)
            self._write([_BLOB_HEAD.pack(KIND_TRAILER, bytes(32), len(table)), table, footer])
        # A pack's mtime is the age of its newest blob (gc's grace): the trailer adds no blob.
        os.utime(self.fd, ns=(before.st_atime_ns, before.st_mtime_ns))
        self.sealed = True
        if durable:
            self.sync()
        self._write_edges()

    def _write_edges(self) -> None:
        """The edges file of the objects noted (before the flock goes: fsck leaves a live writer's pack alone). The
        pack is hashed as it is now, durable and sealed (read back from the page cache: hashing each part as it is
        written cost more, docs/gc-and-archives.md); a writer killed before this leaves a pack with none, which gc
        reads (and then writes its file) and fsck verifies."""
        # The log and the table go as they are read (the trailer holds the table now): each was held until the seal
        # ended, beside the file's arrays and the hash's buffer (docs/scale/building.md, Session 56: the seal).
        log, self.edge_log = self.edge_log, None
        table, self.table = self.table, bytearray()
        if log is None or not len(log) or self.edges_root is None:
            return
        rows = table_columns(table)
        del table
        found = log.against(self.pack_id, rows, verified=False, spend=True)
        del log, rows
        if found is None:
            return
        with contextlib.suppress(OSError):
            digest = pack_digest(self.path)
            write(self.edges_root, StoreLayout(self.edges_root).tmp, self.pack_id, self.size, digest, found)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the flock
            self.fd = -1


def _action_blobs(entries: Sequence[tuple[bytes, bytes | None, int]], start: int) -> tuple[bytes, bytes, range]:
    """Action-cache entries' blobs written from `start` (one buffer), their table rows, where their payloads are."""
    if len(entries) == 1:  # a node's one entry: three struct calls, not the columns' arrays (the same bytes)
        ((key, record, time_ns),) = entries
        offset = start + BLOB_HEAD_SIZE
        return (_BLOB_HEAD.pack(KIND_ACTION, key, ACTION_SIZE) + _ACTION.pack(record or NO_RECORD, time_ns),
                _TABLE_ROW.pack(KIND_ACTION, key, offset, ACTION_SIZE), range(offset, offset + 1))
    keys, records, times = zip(*entries, strict=True)
    n, step, ids = len(entries), BLOB_HEAD_SIZE + ACTION_SIZE, b"".join(keys)
    kinds, lengths = bytes([KIND_ACTION]) * n, columns.column("Q", repeat(ACTION_SIZE, n))
    offsets = range(start + BLOB_HEAD_SIZE, start + step * n, step)
    blob = columns.rows(step, n, kinds, ids, lengths, b"".join([record or NO_RECORD for record in records]),
                        columns.column("q", times))
    return blob, columns.rows(_TABLE_ROW.size, n, kinds, ids, columns.column("Q", offsets), lengths), offsets


def table_columns(table: bytes | bytearray) -> Table:
    """The ids and payload offsets of a table's rows (an edges file names blobs by their row): by numpy when this
    process has imported it already (gc's walk by arrays: one pass over the table where the strided copies below made
    40, 4 ms against 0.05 s for a 10,000 x 5 store's 14 packs), never imported for it."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        return _table_columns_numpy(numpy, table)
    size = _TABLE_ROW.size
    ids = bytearray(len(table) // size * 32)
    for byte in range(32):  # (a column a byte at a time, by extended slices: no object made per row)
        ids[byte::32] = table[1 + byte::size]
    return Table(bytes(ids), columns.values("Q", table, size, 33))


def _table_columns_numpy(numpy: Any, table: bytes | bytearray) -> Table:
    """`table_columns` by numpy: the rows' ids and offsets taken as fields of one structured view."""
    rows = numpy.frombuffer(table, dtype=numpy.dtype({"names": ["id", "offset"], "formats": ["V32", "<u8"],
                                                       "offsets": [1, 33], "itemsize": _TABLE_ROW.size}),
                            count=len(table) // _TABLE_ROW.size)
    offsets = array("Q")
    offsets.frombytes(rows["offset"].astype("=u8").tobytes())  # (native order, as `columns.values` gives)
    return Table(rows["id"].tobytes(), offsets)


def table_of(path: Path) -> Table | None:
    """A sealed pack's rows (its checksum verified); None if it is not sealed."""
    table = _sealed_table(path)
    return table_columns(table) if table is not None else None


def writer_alive(path: Path) -> bool:
    """Does a live process still append to this pack (it holds the pack's flock)?"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@dataclass
class PackScan:
    blobs: list[Blob]
    sealed: bool  # the trailer was found and matches
    size: int
    torn_at: int | None = None  # offset of an incomplete or unreadable blob (a killed writer's tail)
    table: bytes | None = None  # a sealed pack's table, its checksum verified (the rows `blobs` were read from)


def scan_pack(path: Path) -> PackScan:
    """Every blob of a pack: from its trailer if sealed, else by walking the blobs (rebuild, fsck)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        header = fh.read(len(HEADER))
        if len(header) < len(HEADER) and HEADER.startswith(header):
            return PackScan([], False, size, 0)  # its writer is just starting, or was killed before its header
        if header != HEADER:
            raise NotAPackError(f"{path}: not a clawstore pack (bad header)")
        sealed = _read_trailer(fh, size, path)
        if sealed is not None:
            return PackScan(sealed[0], True, size, table=sealed[1])
        return _walk(fh, size)


def walk_pack(path: Path) -> PackScan:
    """The blobs of a pack found by walking it from the start, ignoring any trailer (repair)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if fh.read(len(HEADER)) != HEADER:
            return PackScan([], False, size, 0)
        return _walk(fh, size)


def is_sealed(path: Path) -> bool:
    """Does the pack end in a trailer (its footer and the trailer blob's head agree)? Two small reads."""
    with open(path, "rb") as fh:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        if size < len(HEADER) + BLOB_HEAD_SIZE + _FOOTER.size:
            return False
        count, _, magic = _FOOTER.unpack(os.pread(fd, _FOOTER.size, size - _FOOTER.size))
        table_len = count * _TABLE_ROW.size
        head_at = size - _FOOTER.size - table_len - BLOB_HEAD_SIZE
        if magic != END_MAGIC or head_at < len(HEADER):
            return False
        return os.pread(fd, BLOB_HEAD_SIZE, head_at) == _BLOB_HEAD.pack(KIND_TRAILER, bytes(32), table_len)


def sealed_object_ids(path: Path) -> list[bytes]:
    """The ids (digests) of the objects a sealed pack's table names, in table order (NotAPackError if
    it is not sealed): without making a Blob per row, for a push deciding what to send."""
    return table_object_ids(sealed_table(path))


def sealed_table(path: Path) -> bytes:
    """A sealed pack's table as its trailer holds it (checksum verified; NotAPackError if it is not sealed)."""
    table = _sealed_table(path)
    if table is None:
        raise NotAPackError(f"{path}: not a sealed clawstore pack")
    return table


def _sealed_table(path: Path) -> bytes | None:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        found = _read_table(fh.fileno(), size, path) if fh.read(len(HEADER)) == HEADER else None
    return found[0] if found is not None else None


def table_object_ids(table: bytes) -> list[bytes]:
    """The ids of the objects a pack's table (`sealed_table`) names, in table order: `table_columns`' ids of the
    rows of kind object (action-cache entries left out)."""
    rows = zip(_ID.iter_unpack(table_columns(table).ids), table[::_TABLE_ROW.size], strict=True)
    return [blob_id for (blob_id,), kind in rows if kind == KIND_OBJECT]


def table_in_tail(tail: bytes, rows: int) -> bytes | None:
    """The table of `rows` rows at the end of a sealed pack's last `table_tail_size(rows)` bytes, if its footer
    names that many rows and the table's BLAKE3 (None: it does not)."""
    if len(tail) != table_tail_size(rows):
        return None
    table, footer = tail[:-_FOOTER.size], tail[-_FOOTER.size:]
    count, digest, magic = _FOOTER.unpack(footer)
    return table if (count, digest, magic) == (rows, blake3.blake3(table).digest(), END_MAGIC) else None


def table_tail_size(rows: int) -> int:
    """The bytes at the end of a sealed pack that hold its table of `rows` rows and its footer."""
    return rows * _TABLE_ROW.size + _FOOTER.size


def _read_table(fd: int, size: int, path: Path) -> tuple[bytes, int] | None:
    """A sealed pack's table (checksum verified) and where it starts; None if the pack has no trailer."""
    if size < len(HEADER) + BLOB_HEAD_SIZE + _FOOTER.size:
        return None
    count, digest, magic = _FOOTER.unpack(os.pread(fd, _FOOTER.size, size - _FOOTER.size))
    if magic != END_MAGIC:
        return None
    table_len = count * _TABLE_ROW.size
    start = size - _FOOTER.size - table_len
    if count > size // _TABLE_ROW.size or start - BLOB_HEAD_SIZE < len(HEADER):
        raise NotAPackError(f"{path}: trailer names {count} blobs, more than the file can hold")
    table = os.pread(fd, table_len, start)
    if blake3.blake3(table).digest() != digest:
        raise NotAPackError(f"{path}: trailer is damaged (its checksum does not match)")
    return table, start


def _read_trailer(fh: object, size: int, path: Path) -> tuple[list[Blob], bytes] | None:
    table = _checked_table(fh, size, path)
    if table is None:
        return None
    # (tuple.__new__ mapped: a Blob a row without a Python call each, a third of the time of Blob._make)
    return list(map(tuple.__new__, repeat(Blob), _TABLE_ROW.iter_unpack(table))), table


def _checked_table(fh: object, size: int, path: Path) -> bytes | None:
    """A sealed pack's table (None: no trailer), its rows checked as `scan_pack` checks them: by their columns, not a
    test a blob."""
    found = _read_table(fh.fileno(), size, path)  # type: ignore[attr-defined]
    if found is None:
        return None
    table, start = found
    size = _TABLE_ROW.size
    ends = map(add, columns.values("Q", table, size, 33), columns.values("Q", table, size, 41))
    if table[::size].translate(None, _BLOB_KINDS) or max(ends, default=0) > start:
        raise NotAPackError(f"{path}: trailer names a blob outside the pack")
    return table


def scanned_table(path: Path) -> bytes | None:
    """What `scan_pack` reads of a sealed pack, its table (every check made), without a Blob made a row (fsck, for a
    pack it need not read); None if the pack is not sealed (NotAPackError as `scan_pack` raises it)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        return _checked_table(fh, size, path) if fh.read(len(HEADER)) == HEADER else None


def table_rows(table: bytes) -> list[bytes]:
    """Each row of a table as the bytes of its id, payload offset and length (its kind left out)."""
    size = _TABLE_ROW.size
    return [table[at + 1:at + size] for at in range(0, len(table), size)]


def _walk(fh: object, size: int) -> PackScan:
    fd = fh.fileno()  # type: ignore[attr-defined]
    blobs: list[Blob] = []
    offset = len(HEADER)
    while offset < size:
        head = os.pread(fd, BLOB_HEAD_SIZE, offset)
        if len(head) < BLOB_HEAD_SIZE:
            return PackScan(blobs, False, size, offset)
        kind, blob_id, length = _BLOB_HEAD.unpack(head)
        if kind == KIND_TRAILER:
            return PackScan(blobs, False, size)
        end = offset + BLOB_HEAD_SIZE + length
        if kind not in (KIND_OBJECT, KIND_ACTION) or length > MAX_PAYLOAD or end > size:
            return PackScan(blobs, False, size, offset)
        blobs.append(Blob(kind, blob_id, offset + BLOB_HEAD_SIZE, length))
        offset = end
    return PackScan(blobs, False, size)


def pack_overhead(path: Path) -> int:
    """Bytes of a pack that are structure, not blobs (header, trailer): always counted as used."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < len(HEADER) + BLOB_HEAD_SIZE + _FOOTER.size:
                return size
            count, _, magic = _FOOTER.unpack(os.pread(fh.fileno(), _FOOTER.size, size - _FOOTER.size))
    except FileNotFoundError:
        return 0
    if magic != END_MAGIC:
        return len(HEADER)
    return min(size, len(HEADER) + BLOB_HEAD_SIZE + count * _TABLE_ROW.size + _FOOTER.size)


def iter_pack_ids(packs_dir: Path) -> Iterator[str]:
    for name in sorted(os.listdir(packs_dir)):
        if name.endswith(SUFFIX) and len(name) == 32 + len(SUFFIX):
            yield name[:-len(SUFFIX)]
