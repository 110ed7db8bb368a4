"""The edges file of a sealed pack: its objects, what each names, and (once fsck verified it) each record's facts.

Written by the writer that seals a pack (from the content it hashed), by gc for a pack that has none, by fsck after
verifying every blob; trusted only while the pack's bytes hash to what it records (store/edges.py reads it).
Layout and trust rule: docs/gc-and-archives.md (Details by module, store/edges.py).
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
import sys
from array import array
from binascii import unhexlify
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from pathlib import Path
from typing import Any

import blake3
import zstandard

from clawstore.host.durable import write_file_atomic
from clawstore.store.core.ids import file_digest

DIR = "edges"
SUFFIX = ".edges"
MAGIC = b"CLAWEDG3"  # (CLAWEDG2's files, 32 bytes an edge, are not read: gc or fsck writes them anew)
# magic, pack id, pack size, BLAKE3 of the pack, the pack's blobs (rows of its table), ids of other packs, edges, flags,
# facts' output indices
HEAD = struct.Struct("<8s16sQ32sQQQQQ")
ID = 32
VERIFIED = 1  # fsck decoded and hashed every blob of the pack, and recorded each record's facts
NO_FACT = 0xFFFF  # an object with no record facts (not a record, or one a check must read)
_LEVEL = 1  # zstd: the ordinals compress 3-4x at any level, the lowest is the fastest
_SWAP = sys.byteorder == "big"  # the file's arrays are little-endian
_STEP = 16384  # ids named turned into rows at once when a file is made
# Other packs' ids deduplicated when a file is made (a dict of at most this many: ~7 MB). A pack can name far more
# (the head's parts name every record: ~460,000 ids at 10,000 x 5, a dict that took 120 MB as the build ended); past
# it, an id not yet in the dict is written again (a few bytes more in the file, the same edges read back).
_DEDUP = 65536
BY_ARRAYS = 1 << 18  # ids named a pack's file is made of by numpy at most (traced peak 7.2 MiB at 131,000, the loop's
#   9.9); past it, the loop's dicts (the head's pack names ~460,000)
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
    if not data or data[0] not in _JSON_START and not looks_json(data[:64]):  # (the first byte decides most)
        return []
    return [*map(unhexlify, dict.fromkeys(ID_RE.findall(data)))]


def edges_path(root: Path, pack: str) -> Path:
    return root / DIR / f"{pack}{SUFFIX}"


@dataclass
class Table:
    """A sealed pack's blobs as its trailer lists them (packfile.table_of): an edges file names them by row."""

    ids: bytes  # 32 bytes a row
    offsets: array  # payload offset of each row, ascending

    def __len__(self) -> int:
        return len(self.offsets)


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

    def named(self) -> int:
        """Ids the objects noted name (with repeats)."""
        return len(self.edges) // ID

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

    def against(self, pack: str, table: Table, verified: bool, spend: bool = False, by_arrays: bool = False
                ) -> PackEdges | None:
        """What a file written from this log says, each object a row of the pack's `table` and each id it names a row
        too when the pack holds it (else an index among the other ids); None if the log does not match the table.
        `spend` (the caller's last use of the log): what it holds goes as soon as it is read, not when the file is
        made (its ids and offsets before the rows' dict is built, its edges before the file's ids are joined: a
        build's seal held them all at its peak); the log is left empty. `by_arrays`: the same file made by numpy
        (fsck's packs' helper: ~0.1 s a pack of 50,000 objects less, its arrays' peak bounded by BY_ARRAYS; a build's
        seal and gc never import numpy for it)."""
        rows = len(table)
        if rows + len(self.edges) // ID > 0xFFFFFFFF:
            return None
        covers, counts = array("B", bytes(rows)), array("I", bytes(4 * rows))
        fact_keys = array("H", [NO_FACT]) * rows if verified else array("H")
        fact_counts = array("H", bytes(2 * rows)) if verified else array("H")
        numpy = _numpy() if by_arrays else None
        placed = self._placed if numpy is None else partial(self._placed_by_arrays, numpy)
        if not placed(table, covers, counts, fact_keys, fact_counts):
            return None  # (not the blobs of this pack, or not in its order: the edges below are in row order)
        fact_outs = self.fact_outs if verified else array("H")
        if spend:
            self.ids, self.offsets, self.starts, self.fact_keys, self.fact_starts, self.fact_outs = (
                bytearray(), array("Q"), array("I", [0]), array("H"), array("I", [0]), array("H"))
        by_arrays = _tokens_by_arrays(numpy, table.ids, self.edges) if numpy is not None else None
        if by_arrays is not None:
            if spend:
                self.edges = bytearray()
            return PackEdges(pack, verified, table.offsets, table.ids + by_arrays[1], covers, counts, by_arrays[0],
                             fact_keys, fact_counts, fact_outs)
        # Each id named as a row of this pack's table if it holds it, else as rows + its index among the others; _STEP
        # ids at a time. The dicts are keyed by an id's first 60 bits, an int (32 bytes, where the id's bytes took 72:
        # the seal's highest memory was these two dicts), the whole id compared on a hit; ids whose key another id took
        # first (by chance or made so) are kept whole in a spill dict, so the file is the one whole ids made.
        ids = table.ids
        keys = _keys(ids)
        row_of = dict(zip(keys, range(rows), strict=True))  # (a blob twice in the pack, as happens: its last row)
        own_spill = {} if len(row_of) == rows else \
            {ids[row * ID:(row + 1) * ID]: row for row, key in enumerate(keys) if (kept := row_of[key]) != row
             and ids[kept * ID:(kept + 1) * ID] != ids[row * ID:(row + 1) * ID]}
        del keys
        others: dict[int, int] = {}
        spill: dict[bytes, int] = {}  # others whose key a different other took
        # The others' ids (32 bytes an index among them), joined after the rows' at the end (not copied beside the
        # table's ids while the dicts are held): a BytesIO's value is its buffer, not a copy (the head's pack names
        # ~15 MB of others: a bytearray and its bytes held 30 MB at once as a build ended).
        known = io.BytesIO()
        count = 0
        tokens = array("I")
        for start in range(0, len(self.edges), _STEP * ID):
            chunk = bytes(self.edges[start:start + _STEP * ID])
            named = _keys(chunk)
            found = list(map(row_of.get, named))
            fresh, first = bytearray(), count  # the others first met in this chunk, written to `known` after it
            with known.getbuffer() as held:  # (the earlier ones, compared in place; released before `known` grows)
                for at, token in enumerate(found):
                    if token is not None and chunk.startswith(ids[token * ID:(token + 1) * ID], at * ID):
                        continue  # (a row of this pack: the usual case)
                    digest = chunk[at * ID:(at + 1) * ID]
                    token = own_spill.get(digest) if own_spill else None
                    if token is not None:
                        found[at] = token
                        continue
                    key = named[at]
                    index = others.get(key)
                    if index is not None:
                        at_id = (index if index < first else index - first) * ID
                        if (held if index < first else fresh)[at_id:at_id + ID] != digest:
                            index = spill.get(digest)
                    if index is None:
                        index = count
                        count += 1
                        fresh += digest
                        if len(others) + len(spill) < _DEDUP:
                            if key in others:
                                spill[digest] = index
                            else:
                                others[key] = index
                    found[at] = rows + index
            known.write(fresh)
            tokens.extend(found)  # type: ignore[arg-type]
        del row_of, own_spill, others, spill  # (the dicts go before the ids are joined)
        if spend:
            self.edges = bytearray()
        others_ids = known.getvalue()
        del known
        return PackEdges(pack, verified, table.offsets, ids + others_ids, covers, counts, tokens,
                         fact_keys, fact_counts, fact_outs)

    def _placed(self, table: Table, covers: array, counts: array, fact_keys: array, fact_counts: array) -> bool:
        """Each object noted put at its row of `table` in the per-row arrays (facts' only when they are made); False
        if an object is not the table's blob at its offset, or the objects are not in the table's order."""
        rows, last, facts = len(table), -1, bool(fact_keys)
        for i, offset in enumerate(self.offsets):
            row = bisect_left(table.offsets, offset)
            if row <= last or row == rows or table.offsets[row] != offset \
                    or table.ids[row * ID:(row + 1) * ID] != self.ids[i * ID:(i + 1) * ID]:
                return False
            last = row
            covers[row], counts[row] = 1, self.starts[i + 1] - self.starts[i]
            if facts and self.fact_keys[i] != NO_FACT:
                fact_keys[row] = self.fact_keys[i]
                fact_counts[row] = self.fact_starts[i + 1] - self.fact_starts[i]
        return True

    def _placed_by_arrays(self, np: Any, table: Table, covers: array, counts: array, fact_keys: array,
                          fact_counts: array) -> bool:
        """_placed by numpy, over the arrays in place (a Python step an object took ~1 µs: 50 ms a pack of 50,000
        objects at 10,000 x 5, a third of its file's making)."""
        if not self.offsets:
            return True
        offsets = np.frombuffer(table.offsets, dtype=np.uint64)
        mine = np.frombuffer(self.offsets, dtype=np.uint64)
        at = np.searchsorted(offsets, mine)  # (the row bisect_left finds)
        if at[-1] >= len(offsets) or (at[1:] <= at[:-1]).any() or not np.array_equal(offsets[at], mine) \
                or not np.array_equal(np.frombuffer(table.ids, dtype=np.uint64).reshape(-1, 4)[at],
                                      np.frombuffer(self.ids, dtype=np.uint64).reshape(-1, 4)):
            return False
        np.frombuffer(covers, dtype=np.uint8)[at] = 1
        np.frombuffer(counts, dtype=np.uint32)[at] = np.diff(np.frombuffer(self.starts, dtype=np.uint32))
        if fact_keys:  # (an object without facts: NO_FACT and no outputs, as the rows are made)
            outs = np.diff(np.frombuffer(self.fact_starts, dtype=np.uint32))
            if outs.max() > 0xFFFF:
                return self._placed(table, covers, counts, fact_keys, fact_counts)  # (which refuses it as before)
            np.frombuffer(fact_keys, dtype=np.uint16)[at] = np.frombuffer(self.fact_keys, dtype=np.uint16)
            np.frombuffer(fact_counts, dtype=np.uint16)[at] = outs
        return True


def _numpy() -> Any:
    from clawstore.store.core.lean_numpy import np

    return np


def _tokens_by_arrays(np: Any, ids: bytes, edges: bytes | bytearray) -> tuple[array, bytes] | None:
    """EdgeLog.against's tokens of the ids named (`edges`) and its other ids, by numpy where the process imported it
    (the same file as the dicts' loop makes, a Python step an id named: 60-70 ms a pack of 131,000 at 10,000 x 5).
    None where that loop is left to decide: more than BY_ARRAYS ids named (its memory bounded as it is), more than
    _DEDUP others (each met again then written again), or two ids that share their first 8 bytes (made so)."""
    count = len(edges) // ID
    if not count or count > BY_ARRAYS:
        return (array("I"), b"") if not count else None
    named = np.frombuffer(edges, dtype=np.uint64).reshape(-1, 4)
    own = np.frombuffer(ids, dtype=np.uint64).reshape(-1, 4)
    rows = len(own)
    # Rows: each id named searched by its first word among the table's (sorted, stable: of a blob twice in the pack,
    # the last row is found, as the dict of rows keeps it), a hit's whole id compared
    by_word = np.argsort(own[:, 0], kind="stable")
    words = own[by_word, 0]
    at = np.maximum(np.searchsorted(words, named[:, 0], side="right") - 1, 0)
    found = by_word[at] if rows else np.zeros(count, dtype=np.int64)
    same_word = words[at] == named[:, 0] if rows else np.zeros(count, dtype=bool)
    hit = same_word.copy()
    for column in range(1, 4) if rows else ():  # (a column at a time: 8 bytes an id held beside, not 32)
        hit &= own[found, column] == named[:, column]
    if (same_word & ~hit).any():
        return None  # (another row's first word: the loop asks each whole id)
    # Others: numbered in order of first mention, each distinct whole id once
    other_at = np.flatnonzero(~hit)
    by_id = other_at[np.argsort(named[other_at, 0], kind="stable")]  # (equal words in mention order)
    new_word = np.ones(len(by_id), dtype=bool)
    new_word[1:] = named[by_id[1:], 0] != named[by_id[:-1], 0]
    group = np.cumsum(new_word) - 1
    first = by_id[new_word]  # each distinct other's first mention
    if len(first) > _DEDUP or any((named[by_id, column] != named[first, column][group]).any() for column in range(4)):
        return None
    numbering = np.empty(len(first), dtype=np.int64)
    numbering[np.argsort(first)] = np.arange(len(first))
    tokens = found.astype(np.uint32)
    tokens[by_id] = rows + numbering[group]
    made = array("I")
    made.frombytes(tokens.tobytes())
    return made, named[np.sort(first)].tobytes()


@dataclass
class PackEdges:
    """One pack's blobs (its table's rows), which of them the file covers and the ids each names and, when fsck
    verified the pack, each record's facts, as flat arrays."""

    pack: str
    verified: bool
    offsets: array  # payload offset of each row of the pack's table, ascending
    known: bytes  # the id of each row, then the ids named that the pack does not hold (in order of first mention; past
    # _DEDUP of them, an id may be there twice)
    covers: array  # per row: 1 if the file says what it names, else 0 (read it)
    counts: array  # per row: how many ids it names
    tokens: array  # per id named: its place in `known` (a row of this pack, or past the rows: another id)
    fact_keys: array  # per row: index of its key among its edges, NO_FACT if none (empty unless verified)
    fact_counts: array  # per row: how many outputs it has in `fact_outs`
    fact_outs: array  # output indices among the object's edges
    # What a reader learnt of each row and other id (fsck_rows: a byte each), made by the reader, gone with the file
    answers: bytearray | None = field(default=None, init=False, repr=False, compare=False)
    # Where the index puts each row and other id (fsck_rows: its pack's number and offset), made and gone likewise
    located: tuple[Any, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.starts = _starts(self.counts)
        self.fact_starts = _starts(self.fact_counts)

    @property
    def others(self) -> memoryview:
        return memoryview(self.known)[len(self.offsets) * ID:]  # (a view: the head's pack names ~15 MB of them)

    def covered(self) -> list[tuple[bytes, int]]:
        """The (id, offset) of each object the file says what it names."""
        known = self.known
        return [(known[row * ID:(row + 1) * ID], self.offsets[row]) for row, covered in enumerate(self.covers)
                if covered]

    def position(self, digest: bytes, offset: int) -> int | None:
        pos = bisect_left(self.offsets, offset)
        if pos == len(self.offsets) or self.offsets[pos] != offset or not self.covers[pos] \
                or self.known[pos * ID:(pos + 1) * ID] != digest:
            return None
        return pos

    def children(self, digest: bytes, offset: int) -> list[bytes] | None:
        """What the object `digest` at `offset` names; None if this file does not cover it."""
        pos = self.position(digest, offset)
        return None if pos is None else self._named(pos)

    def _named(self, pos: int) -> list[bytes]:
        known = self.known
        return [known[token * ID:token * ID + ID] for token in self.tokens[self.starts[pos]:self.starts[pos + 1]]]

    def facts(self, digest: bytes, offset: int) -> tuple[bytes, list[bytes]] | None:
        """A record's key and outputs (digests, outputs in the record's order), None if none are recorded."""
        pos = self.position(digest, offset) if self.verified else None
        if pos is None or self.fact_keys[pos] == NO_FACT:
            return None
        named = self._named(pos)
        key, outs = self.fact_keys[pos], self.fact_outs[self.fact_starts[pos]:self.fact_starts[pos + 1]]
        if key >= len(named) or any(i >= len(named) for i in outs):
            return None  # (a file that does not fit its own edges: the record is read)
        return named[key], [named[i] for i in outs]

    def encode(self, size: int, pack_digest: bytes) -> list[bytes]:
        """The file's parts, its checksum last."""
        arrays = [self.covers, self.counts, self.tokens]
        if self.verified:
            arrays += [self.fact_keys, self.fact_counts, self.fact_outs]
        body = zstandard.ZstdCompressor(level=_LEVEL).compress(b"".join(_little(part) for part in arrays))
        parts = [HEAD.pack(MAGIC, bytes.fromhex(self.pack), size, pack_digest, len(self.offsets),
                           len(self.others) // ID, len(self.tokens), VERIFIED if self.verified else 0,
                           len(self.fact_outs)),
                 self.others, body]
        checksum = blake3.blake3()
        for part in parts:
            checksum.update(part)
        return [*parts, checksum.digest()]


def _keys(ids: bytes) -> list[int]:
    """Each 32-byte id's first 60 bits as an int (its first 8 bytes taken as a column by strided copies, in C)."""
    column = bytearray(len(ids) // ID * 8)
    for byte in range(8):
        column[byte::8] = ids[byte::ID]
    return list(map((4).__rrshift__, array("Q", column)))  # (60 bits: an int of two digits, 32 bytes; 64 took 40)


def _little(part: array) -> bytes:
    if not _SWAP:
        return part.tobytes()
    swapped = array(part.typecode, part)
    swapped.byteswap()
    return swapped.tobytes()


def _read(code: str, data: bytes | memoryview) -> array:
    found = array(code)
    found.frombytes(data)
    if _SWAP:
        found.byteswap()
    return found


def write(root: Path, tmp_dir: Path, pack: str, size: int, pack_digest: bytes, found: PackEdges) -> None:
    """Write a pack's file (a cache: a store that cannot be written skips it)."""
    with contextlib.suppress(OSError):
        (root / DIR).mkdir(exist_ok=True)
        write_file_atomic(edges_path(root, pack), found.encode(size, pack_digest), tmp_dir, durable=False)


def recorded(data: bytes, pack: str, size: int) -> bytes | None:
    """The pack digest a whole file about this pack of `size` bytes records (its checksum holds); None otherwise."""
    if len(data) < HEAD.size + ID or blake3.blake3(memoryview(data)[:-ID]).digest() != data[-ID:]:
        return None
    magic, pack_id, recorded_size, digest = HEAD.unpack_from(data)[:4]
    if magic != MAGIC or pack_id != bytes.fromhex(pack) or recorded_size != size:
        return None
    return digest


def says_verified(data: bytes) -> bool:
    """Whether a file's head says fsck verified its pack (not yet checked: `recorded` and `decode` do that)."""
    return len(data) >= HEAD.size and bool(HEAD.unpack_from(data)[7] & VERIFIED)


def decode(pack: str, data: bytes, size: int, table: Table) -> PackEdges | None:
    """The arrays of a file `recorded` accepted, its rows those of the pack's `table`; None if they do not fit."""
    rows, other_count, edge_count, flags, out_count = HEAD.unpack_from(data)[4:]
    verified = bool(flags & VERIFIED)
    widths = [rows, 4 * rows, 4 * edge_count, *((2 * rows, 2 * rows, 2 * out_count) if verified else ())]
    body_at = HEAD.size + ID * other_count
    if rows != len(table) or edge_count > size or out_count > size or body_at > len(data) - ID:
        return None
    frame = data[body_at:-ID]
    try:
        if zstandard.frame_content_size(frame) != sum(widths):  # (nothing larger is made)
            return None
        body = zstandard.ZstdDecompressor().decompress(frame)
    except zstandard.ZstdError:
        return None
    at = list(accumulate(widths, initial=0))
    if len(body) != at[-1]:
        return None
    view = memoryview(body)  # (each array made from the body in place: a copy of each part was held beside it)
    parts = [_read(code, view[at[i]:at[i + 1]]) for i, code in enumerate("BIIHHH"[:len(widths)])]
    del view, body
    covers, counts, tokens = parts[:3]
    # (each cover 0 or 1: what is left once those bytes are deleted, in C, is empty)
    if covers.tobytes().translate(None, b"\0\1") or (edge_count and _largest(tokens) >= rows + other_count):
        return None
    facts = parts[3:] if verified else [array("H"), array("H"), array("H")]
    try:
        found = PackEdges(pack, verified, table.offsets, table.ids + data[HEAD.size:body_at], covers, counts, tokens,
                          *facts)
    except OverflowError:  # (counts adding up past 2**32: not a file any writer makes)
        return None
    return found if found.starts[-1] == edge_count else None  # (the counts' sum: their starts' end)


def _starts(counts: array) -> array:
    """Where each row's run of `counts` starts, and the end (`accumulate` from 0): by numpy's cumsum when this process
    has imported it already (gc's walk by arrays: 0.02 s for a 10,000 x 5 store's files, a tenth of loading them
    besides hashing the packs), never imported for it."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not counts:
        return array("I", accumulate(counts, initial=0))
    ends = numpy.cumsum(numpy.frombuffer(counts, dtype=f"u{counts.itemsize}"), dtype=numpy.uint64)
    if int(ends[-1]) >= 1 << 32:
        raise OverflowError("the counts add up past an array('I')")  # (as `accumulate` into one would)
    found = array("I", [0])
    found.frombytes(ends.astype(numpy.uint32).tobytes())
    return found


def _largest(tokens: array) -> int:
    """`max(tokens)`, by numpy when this process has imported it already (gc's walk by arrays: Python's `max` took
    0.03 s over a 10,000 x 5 store's 1.7 M tokens, a fifth of loading its files); never imported for it."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return max(tokens)
    return int(numpy.frombuffer(tokens, dtype=f"u{tokens.itemsize}").max())


def pack_digest(path: Path) -> bytes:
    """BLAKE3 of a pack's bytes, as its edges file records it."""
    return bytes.fromhex(file_digest(path))
