"""A verified cache of each sealed pack's objects and what each names (its outgoing ids), one file a pack in edges/.

Objects are immutable, so what they name is too. fsck writes a pack's file after verifying every blob of it; the
file records the BLAKE3 of the pack's bytes and is trusted only while the pack still hashes to it (at disk speed)
and its own checksum holds: then fsck need not decode the pack again, and gc walks it without reading it. A damaged,
truncated or stale file is ignored and rewritten by the next fsck. docs/gc-and-archives.md (Roots and reachability).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
from array import array
from binascii import unhexlify
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import blake3

from clawstore.host.durable import write_file_atomic
from clawstore.store.core import codec
from clawstore.store.core.adopt import blob_problem
from clawstore.store.core.ids import file_digest
from clawstore.store.core.index import IndexView
from clawstore.store.core.packfile import KIND_OBJECT, Blob, iter_pack_ids, pack_path

DIR = "edges"
SUFFIX = ".edges"
_MAGIC = b"CLAWEDG1"
_HEAD = struct.Struct("<8s16sQ32sQQ")  # magic, pack id, pack size, BLAKE3 of the pack, objects, edges
_ID = 32
REGION = 8 << 20  # pack bytes read (and content decoded) at once when verifying: fsck's memory bound per pack
_STORED_MAX = 1 << 20  # objects stored larger than this are verified on their own (streamed over 4 MiB)
# What an object names (docs/gc-and-archives.md, Roots and reachability): if it is JSON, every id written in it.
ID_RE = re.compile(rb"blake3:([0-9a-f]{64})")
_JSON_START = frozenset(b"{[")
_BLANK = frozenset(b" \t\r\n")


def looks_json(head: bytes | memoryview) -> bool:
    for byte in bytes(head):
        if byte not in _BLANK:
            return byte in _JSON_START
    return False


def children_in(data: bytes | memoryview) -> list[bytes]:
    """Digests of the object ids written in `data` if it is JSON (reach.named_by's rule), deduplicated."""
    if not looks_json(data[:64]):
        return []
    return [unhexlify(found) for found in set(ID_RE.findall(data))]


@dataclass
class PackEdges:
    """One pack's objects (ids and payload offsets, in file order) and the ids each names, as flat arrays."""

    pack: str
    ids: bytes  # 32 bytes an object
    offsets: array  # payload offset of each object, ascending
    starts: array  # where each object's edges begin in `edges` (one more than objects)
    edges: bytes  # 32 bytes an edge

    def children(self, digest: bytes, offset: int) -> list[bytes] | None:
        """What the object `digest` at `offset` names; None if this file does not cover it."""
        pos = bisect_left(self.offsets, offset)
        if pos == len(self.offsets) or self.offsets[pos] != offset or self.ids[pos * _ID:(pos + 1) * _ID] != digest:
            return None
        edges = self.edges
        return [edges[i * _ID:(i + 1) * _ID] for i in range(self.starts[pos], self.starts[pos + 1])]


def edges_path(root: Path, pack: str) -> Path:
    return root / DIR / f"{pack}{SUFFIX}"


def encode(pack: str, size: int, pack_digest: bytes, named: list[tuple[Blob, list[bytes]]]) -> bytes:
    offsets, starts, edges = array("Q"), array("I", [0]), []
    for blob, children in named:
        offsets.append(blob.offset)
        edges += children
        starts.append(len(edges))
    body = b"".join([_HEAD.pack(_MAGIC, bytes.fromhex(pack), size, pack_digest, len(named), len(edges)),
                     b"".join(blob.id for blob, _ in named), offsets.tobytes(), starts.tobytes(), b"".join(edges)])
    return body + blake3.blake3(body).digest()


def write(root: Path, tmp_dir: Path, pack: str, size: int, pack_digest: bytes,
          named: list[tuple[Blob, list[bytes]]]) -> PackEdges:
    """Record a pack every blob of which was just verified (a cache: a store that cannot be written skips it)."""
    data = encode(pack, size, pack_digest, named)
    with contextlib.suppress(OSError):
        (root / DIR).mkdir(exist_ok=True)
        write_file_atomic(edges_path(root, pack), data, tmp_dir, durable=False)
    return decode(pack, data)


def load(root: Path, packs_dir: Path, pack: str) -> PackEdges | None:
    """The pack's file if it is whole and the pack's bytes still hash to what it records, else None."""
    try:
        data = edges_path(root, pack).read_bytes()
        size = os.stat(pack_path(packs_dir, pack)).st_size
    except OSError:
        return None
    if len(data) < _HEAD.size + _ID or blake3.blake3(memoryview(data)[:-_ID]).digest() != data[-_ID:]:
        return None
    magic, pack_id, recorded_size, recorded, count, edge_count = _HEAD.unpack_from(data)
    edges_at = _HEAD.size + _ID * count + 8 * count + 4 * (count + 1)
    if (magic != _MAGIC or pack_id != bytes.fromhex(pack) or recorded_size != size
            or edges_at + _ID * edge_count != len(data) - _ID):
        return None
    try:
        if pack_digest(pack_path(packs_dir, pack)) != recorded:
            return None  # the pack changed since it was verified: what it names must be read again
    except OSError:
        return None
    return decode(pack, data)


def decode(pack: str, data: bytes) -> PackEdges:
    """The arrays of a file `load` checked (or `encode` just made)."""
    count = _HEAD.unpack_from(data)[4]
    ids_at = _HEAD.size
    offsets_at = ids_at + _ID * count
    starts_at = offsets_at + 8 * count
    edges_at = starts_at + 4 * (count + 1)
    offsets, starts = array("Q"), array("I")
    offsets.frombytes(data[offsets_at:starts_at])
    starts.frombytes(data[starts_at:edges_at])
    return PackEdges(pack, data[ids_at:offsets_at], offsets, starts, data[edges_at:-_ID])


class EdgeCache:
    """What objects name, from the edges files of their packs that verify (each loaded on first use, then held:
    at most 32 bytes an object and an edge, plus 12 an object)."""

    def __init__(self, root: Path, packs_dir: Path, index: IndexView):
        self._root, self._packs_dir, self._index = root, packs_dir, index
        self._packs: dict[str, PackEdges | None] = {}

    def add(self, found: PackEdges) -> None:
        self._packs[found.pack] = found

    def children(self, digest: bytes) -> list[bytes] | None:
        """What the object names, None when no verified file covers it (it is then read)."""
        loc = self._index.find_object(digest, look_again=False)  # (what the index lacks is read)
        if loc is None:
            return None
        if loc[0] not in self._packs:
            self._packs[loc[0]] = load(self._root, self._packs_dir, loc[0])
        found = self._packs[loc[0]]
        return found.children(digest, loc[1]) if found is not None else None


def remove_stale(root: Path, packs_dir: Path) -> None:
    """Drop the files of packs that are gone (gc rewrote or deleted them; repair moved them aside)."""
    directory = root / DIR
    if not directory.is_dir():
        return
    packs = set(iter_pack_ids(packs_dir))
    for name in os.listdir(directory):
        if name.removesuffix(SUFFIX) not in packs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)


def verify_blobs(fh: BinaryIO, pack: str, blobs: list[Blob]) -> Iterator[tuple[Blob, str | None, list[bytes] | None]]:
    """Each blob of a pack checked, in file order: (blob, why it is damaged or None, what it names or None when not
    read here). Objects are read a region of at most REGION bytes at a time and decoded by zstd's batch API; large
    ones, and any batch that does not decode, are checked one by one (blob_problem says what is wrong)."""
    fd = fh.fileno()
    group: list[Blob] = []
    for blob in blobs:
        if blob.kind != KIND_OBJECT or blob.length > _STORED_MAX:
            yield from _verify_group(fd, pack, group, fh)
            group = []
            yield blob, blob_problem(fh, pack, blob), None
            continue
        if group and blob.offset + blob.length - group[0].offset > REGION:
            yield from _verify_group(fd, pack, group, fh)
            group = []
        group.append(blob)
    yield from _verify_group(fd, pack, group, fh)


def _verify_group(fd: int, pack: str, group: list[Blob], fh: BinaryIO
                  ) -> Iterator[tuple[Blob, str | None, list[bytes] | None]]:
    if not group:
        return
    start = group[0].offset
    region = os.pread(fd, group[-1].offset + group[-1].length - start, start)
    batch: list[Blob] = []
    spans: list[tuple[int, int]] = []
    held = 0
    for blob in group:
        at = blob.offset - start
        size = codec.batch_size(region[at:at + codec.MAX_HEADER]) if at + blob.length <= len(region) else 0
        if size:
            batch.append(blob)
            spans.append((at, blob.length))
            held += size
    decoded = codec.decode_frames(region, spans, held) if spans else None
    contents = dict(zip(batch, decoded, strict=True)) if decoded is not None else {}
    for blob in group:
        content = contents.get(blob)
        if content is not None and blake3.blake3(content).digest() == blob.id:
            yield blob, None, children_in(memoryview(content))
        else:  # not batched (empty, no declared size), or damaged: checked alone, which names what is wrong
            why = blob_problem(fh, pack, blob)
            yield blob, why, None if why else _children_of_one(fd, blob)


def _children_of_one(fd: int, blob: Blob) -> list[bytes] | None:
    """What an object checked alone names (small ones only: large ones are left to the walk)."""
    if blob.length > _STORED_MAX:
        return None
    frame = os.pread(fd, blob.length, blob.offset)
    return children_in(codec.decode_verified("", blob.id.hex(), "", frame))


def pack_digest(path: Path) -> bytes:
    """BLAKE3 of a pack's bytes, as the edges file records it."""
    return bytes.fromhex(file_digest(path))


