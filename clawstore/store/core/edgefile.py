"""The edges file of a sealed pack: its objects, what each names, and (once fsck verified it) each record's facts.

Written by the writer that seals a pack (from the content it hashed), by gc for a pack that has none, by fsck after
verifying every blob; trusted only while the pack's bytes hash to what it records (store/edges.py reads it).
Layout and trust rule: docs/gc-and-archives.md (Details by module, store/edges.py).
"""

from __future__ import annotations

import contextlib
import re
import struct
from array import array
from binascii import unhexlify
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

import blake3

from clawstore.host.durable import write_file_atomic
from clawstore.store.core.ids import file_digest

DIR = "edges"
SUFFIX = ".edges"
MAGIC = b"CLAWEDG2"
# magic, pack id, pack size, BLAKE3 of the pack, objects, edges, flags, facts' output indices
HEAD = struct.Struct("<8s16sQ32sQQQQ")
ID = 32
VERIFIED = 1  # fsck decoded and hashed every blob of the pack, and recorded each record's facts
NO_FACT = 0xFFFF  # an object with no record facts (not a record, or one a check must read)
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
    return [unhexlify(found) for found in dict.fromkeys(ID_RE.findall(data))]


def edges_path(root: Path, pack: str) -> Path:
    return root / DIR / f"{pack}{SUFFIX}"


class EdgeLog:
    """What a pack's objects name, gathered as they are written or read (in file order): 32 bytes an object and an
    edge, 12 more an object; with facts (fsck), a record's key and outputs as indices into its edges."""

    def __init__(self) -> None:
        self.ids = bytearray()
        self.offsets = array("Q")
        self.starts = array("I", [0])
        self.edges = bytearray()
        self.fact_keys = array("H")
        self.fact_starts = array("I", [0])
        self.fact_outs = array("H")

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, blob_id: bytes, offset: int, children: list[bytes], fact: tuple[int, list[int]] | None = None
            ) -> None:
        self.ids += blob_id
        self.offsets.append(offset)
        self.edges += b"".join(children)
        self.starts.append(len(self.edges) // ID)
        self.fact_keys.append(NO_FACT if fact is None else fact[0])
        if fact is not None:
            self.fact_outs.extend(fact[1])
        self.fact_starts.append(len(self.fact_outs))

    def encode(self, pack: str, size: int, pack_digest: bytes, flags: int) -> list[bytes | bytearray]:
        """The file's parts, its checksum last (written as they are: no copy of the whole is made)."""
        parts: list[bytes | bytearray] = [
            HEAD.pack(MAGIC, bytes.fromhex(pack), size, pack_digest, len(self), len(self.edges) // ID, flags,
                      len(self.fact_outs)),
            self.ids, self.offsets.tobytes(), self.starts.tobytes(), self.edges]
        if flags & VERIFIED:
            parts += [self.fact_keys.tobytes(), self.fact_starts.tobytes(), self.fact_outs.tobytes()]
        checksum = blake3.blake3()
        for part in parts:
            checksum.update(part)
        return [*parts, checksum.digest()]

    def held(self, pack: str, verified: bool) -> PackEdges:
        """What a file written from this log says (for its writer: no need to read it back)."""
        return PackEdges(pack, verified, bytes(self.ids), self.offsets, self.starts, bytes(self.edges),
                         self.fact_keys if verified else array("H"), self.fact_starts if verified else array("I"),
                         self.fact_outs if verified else array("H"))


@dataclass
class PackEdges:
    """One pack's objects (ids and payload offsets, in file order), the ids each names and, when fsck verified the
    pack, each record's facts, as flat arrays."""

    pack: str
    verified: bool
    ids: bytes  # 32 bytes an object
    offsets: array  # payload offset of each object, ascending
    starts: array  # where each object's edges begin in `edges` (one more than objects)
    edges: bytes  # 32 bytes an edge
    fact_keys: array  # per object: index of its key among its edges, NO_FACT if none (empty unless verified)
    fact_starts: array
    fact_outs: array  # output indices among the object's edges

    def position(self, digest: bytes, offset: int) -> int | None:
        pos = bisect_left(self.offsets, offset)
        if pos == len(self.offsets) or self.offsets[pos] != offset or self.ids[pos * ID:(pos + 1) * ID] != digest:
            return None
        return pos

    def children(self, digest: bytes, offset: int) -> list[bytes] | None:
        """What the object `digest` at `offset` names; None if this file does not cover it."""
        pos = self.position(digest, offset)
        if pos is None:
            return None
        edges = self.edges
        return [edges[i * ID:(i + 1) * ID] for i in range(self.starts[pos], self.starts[pos + 1])]

    def facts(self, digest: bytes, offset: int) -> tuple[bytes, list[bytes]] | None:
        """A record's key and outputs (digests, outputs in the record's order), None if none are recorded."""
        pos = self.position(digest, offset) if self.verified else None
        if pos is None or self.fact_keys[pos] == NO_FACT:
            return None
        first, edges = self.starts[pos], self.edges

        def edge(i: int) -> bytes:
            return edges[(first + i) * ID:(first + i + 1) * ID]

        outs = self.fact_outs[self.fact_starts[pos]:self.fact_starts[pos + 1]]
        return edge(self.fact_keys[pos]), [edge(i) for i in outs]


def write(root: Path, tmp_dir: Path, pack: str, size: int, pack_digest: bytes, log: EdgeLog, flags: int) -> None:
    """Write a pack's file (a cache: a store that cannot be written skips it)."""
    with contextlib.suppress(OSError):
        (root / DIR).mkdir(exist_ok=True)
        write_file_atomic(edges_path(root, pack), log.encode(pack, size, pack_digest, flags), tmp_dir, durable=False)


def decode(pack: str, data: bytes, size: int) -> tuple[PackEdges, bytes] | None:
    """The arrays of a whole file about this pack of `size` bytes, and the pack digest it records; None otherwise."""
    if len(data) < HEAD.size + ID or blake3.blake3(memoryview(data)[:-ID]).digest() != data[-ID:]:
        return None
    magic, pack_id, recorded_size, recorded, count, edge_count, flags, out_count = HEAD.unpack_from(data)
    verified = bool(flags & VERIFIED)
    at = [HEAD.size]
    for width in (ID * count, 8 * count, 4 * (count + 1), ID * edge_count,
                  *((2 * count, 4 * (count + 1), 2 * out_count) if verified else ())):
        at.append(at[-1] + width)
    if magic != MAGIC or pack_id != bytes.fromhex(pack) or recorded_size != size or at[-1] != len(data) - ID:
        return None
    offsets, starts, fact_keys, fact_starts, fact_outs = (array(code) for code in ("Q", "I", "H", "I", "H"))
    offsets.frombytes(data[at[1]:at[2]])
    starts.frombytes(data[at[2]:at[3]])
    if verified:
        fact_keys.frombytes(data[at[4]:at[5]])
        fact_starts.frombytes(data[at[5]:at[6]])
        fact_outs.frombytes(data[at[6]:at[7]])
    return PackEdges(pack, verified, data[at[0]:at[1]], offsets, starts, data[at[3]:at[4]], fact_keys, fact_starts,
                     fact_outs), recorded


def pack_digest(path: Path) -> bytes:
    """BLAKE3 of a pack's bytes, as its edges file records it."""
    return bytes.fromhex(file_digest(path))
