"""An archive manifest's two big fields held packed: the object listing (sorted 32-byte digests and their sizes in
arrays) and the action-cache entries (sorted key digests, their records' digests in key order), with the strict
scanners that read them from the manifest's bytes in their canonical form only. Memory: docs/gc-and-archives.md
(Scale: memory of export and import)."""

from __future__ import annotations

import binascii
import re
import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Any

from clawstore.store.core.ids import PREFIX, is_hex64

_PREFIX = struct.Struct(">I")  # a digest's first 4 bytes, as the prefixes' array holds them
_PIECE = 1 << 20  # bytes of a listing scanned at once (each piece's matches are let go before the next)


class SortedDigests:
    """Distinct 32-byte digests, sorted, packed in one bytes: `hex in digests` and `index(digest)` by binary search,
    first in an array of each digest's first 4 bytes (in C), then among the few that share them. No set of strs."""

    def __init__(self, digests: bytes):
        self.digests = digests
        count = len(digests) // 32
        prefixes = bytearray(4 * count)
        view = memoryview(digests)
        for at in range(4):
            prefixes[at::4] = view[at::32]
        self._prefixes = array("I")  # (4 bytes on every platform claw runs on)
        self._prefixes.frombytes(prefixes)
        if sys.byteorder == "little":
            self._prefixes.byteswap()  # (big-endian: integer order is the digests' order)

    def __len__(self) -> int:
        return len(self._prefixes)

    def digest_at(self, index: int) -> bytes:
        return self.digests[index * 32:index * 32 + 32]

    def hex_at(self, index: int) -> str:
        return self.digests[index * 32:index * 32 + 32].hex()

    def index(self, digest: bytes, hint: int = -1) -> int:
        """Where `digest` is (-1: not there); `hint`: where it is likely to be, tried first."""
        digests = self.digests
        if 0 <= hint < len(self._prefixes) and digests[hint * 32:hint * 32 + 32] == digest:
            return hint
        prefix = _PREFIX.unpack_from(digest)[0]
        at = bisect_left(self._prefixes, prefix)
        while at < len(self._prefixes) and self._prefixes[at] == prefix:
            found = digests[at * 32:at * 32 + 32]
            if found == digest:
                return at
            if found > digest:
                break
            at += 1  # (digests sharing 4 bytes: a handful at most, unless made so on purpose; then still correct)
        return -1

    def has_digest(self, digest: bytes) -> bool:
        return len(digest) == 32 and self.index(digest) >= 0

    def __contains__(self, hexdigest: object) -> bool:
        """Is this hex digest (a str of 64 lowercase hex digits) one of them?"""
        if hexdigest.__class__ is not str or len(hexdigest) != 64:  # type: ignore[arg-type]
            return False
        try:
            digest = bytes.fromhex(hexdigest)  # type: ignore[arg-type]
        except ValueError:
            return False
        if len(digest) != 32:  # (fromhex takes spaces; and uppercase digits: a hit is checked for them below)
            return False
        digests, prefixes = self.digests, self._prefixes  # (index's search inline: asked of every id a check names)
        prefix = _PREFIX.unpack_from(digest)[0]
        at = bisect_left(prefixes, prefix)
        while at < len(prefixes) and prefixes[at] == prefix:
            found = digests[at * 32:at * 32 + 32]
            if found == digest:
                return is_hex64(hexdigest)  # type: ignore[arg-type]
            if found > digest:
                break
            at += 1
        return False


class ObjectListing(SortedDigests):
    """An archive's object listing: its digests sorted, each with its stored size. A sequence of (hex, size)."""

    def __init__(self, digests: bytes, sizes: array):
        super().__init__(digests)
        self.sizes = sizes

    def __getitem__(self, index: int) -> tuple[str, int]:
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        return self.hex_at(index), self.sizes[index]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        digests, sizes = self.digests, self.sizes
        for index in range(len(sizes)):
            yield digests[index * 32:index * 32 + 32].hex(), sizes[index]

    def places(self, digests: Iterator[bytes]) -> bytearray:
        """One byte per listed object: 1 where it is one of `digests` (the records the entry checks read next, known as
        the members go by without a search each)."""
        flags = bytearray(len(self))
        for digest in digests:
            at = self.index(digest)
            if at >= 0:
                flags[at] = 1
        return flags

    @property
    def stored_bytes(self) -> int:
        return sum(self.sizes)

    def to_json(self) -> list[list[Any]]:
        """As the manifest writes it (for `claw archive ls --json`)."""
        return [[hexdigest, size] for hexdigest, size in self]

    @classmethod
    def of_pairs(cls, pairs: list[list[Any]]) -> ObjectListing:
        """From a parsed listing already checked (sorted, distinct, [<64 hex>, <size>] each)."""
        digests = b"".join(bytes.fromhex(hexdigest) for hexdigest, _ in pairs)
        return cls(digests, array("Q", (size for _, size in pairs)))


class ActionEntries(Mapping[str, str]):
    """An archive's action-cache entries, key id -> record id: the keys' digests sorted, the records' in the same
    order. Iterated in key order (the manifest's)."""

    def __init__(self, keys: bytes, records: bytes):
        self.keys_sorted = SortedDigests(keys)
        self.records = records

    def __len__(self) -> int:
        return len(self.keys_sorted)

    def __getitem__(self, key: str) -> str:
        at = -1
        if isinstance(key, str) and key.startswith(PREFIX) and key[len(PREFIX):] in self.keys_sorted:
            at = self.keys_sorted.index(bytes.fromhex(key[len(PREFIX):]))
        if at < 0:
            raise KeyError(key)
        return PREFIX + self.records[at * 32:at * 32 + 32].hex()

    def __iter__(self) -> Iterator[str]:
        keys = self.keys_sorted.digests
        for at in range(0, len(keys), 32):
            yield PREFIX + keys[at:at + 32].hex()

    def items(self) -> ItemsView[str, str]:
        return _Items(self)

    def values(self) -> ValuesView[str]:
        return _Values(self)

    def record_digests(self) -> Iterator[bytes]:
        """The records' digests, in key order."""
        records = self.records
        return (records[at:at + 32] for at in range(0, len(records), 32))

    def pairs(self) -> Iterator[tuple[str, str]]:
        """(key id, record id), in key order."""
        keys, records = self.keys_sorted.digests, self.records
        for at in range(0, len(keys), 32):
            yield PREFIX + keys[at:at + 32].hex(), PREFIX + records[at:at + 32].hex()

    @classmethod
    def of_dict(cls, actions: Mapping[str, str]) -> ActionEntries:
        """From parsed entries already checked (ids both)."""
        keys = sorted(actions)
        return cls(b"".join(bytes.fromhex(key[len(PREFIX):]) for key in keys),
                   b"".join(bytes.fromhex(actions[key][len(PREFIX):]) for key in keys))


class _Items(ItemsView[str, str]):
    _mapping: ActionEntries

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return self._mapping.pairs()


class _Values(ValuesView[str]):
    _mapping: ActionEntries

    def __iter__(self) -> Iterator[str]:
        records = self._mapping.records
        for at in range(0, len(records), 32):
            yield PREFIX + records[at:at + 32].hex()


NO_ENTRIES = ActionEntries(b"", b"")


# ---------------------------------------------------------------------------------------------- scanners

_ENTRY = rb'\["[0-9a-f]{64}",(?:0|[1-9][0-9]{0,18})\]'
_ENTRIES = re.compile(rb"(?:%s)(?:,%s)*+" % (_ENTRY, _ENTRY))
_LISTED_HEX = re.compile(rb'"([0-9a-f]{64})"')
_LISTED_SIZE = re.compile(rb',([0-9]+)\]')
_ACTION = rb'"blake3:[0-9a-f]{64}":"blake3:[0-9a-f]{64}"'
_ACTION_WIDTH = len(b'"blake3:":"blake3:"') + 128
_ACTIONS = re.compile(rb"(?:%s)(?:,%s)*+" % (_ACTION, _ACTION))
_KEY_HEX = re.compile(rb'"blake3:([0-9a-f]{64})":')
_RECORD_HEX = re.compile(rb':"blake3:([0-9a-f]{64})"')
_SIZE_MAX = (1 << 64) - 1


def scan_objects(data: bytes | bytearray, first: int, end: int) -> ObjectListing | None:
    """The listing from its JSON at data[first:end], if that is exactly its canonical form: `[["<64 lowercase
    hex>",<size>],...]`, no spaces or escapes, sizes in plain decimal (at most 2**64 - 1), the digests strictly
    increasing; None for anything else (the whole manifest's parse then says what is wrong)."""
    if end - first < 2 or data[first] != 0x5B or data[end - 1] != 0x5D:  # [ ]
        return None
    digests = bytearray()
    sizes = array("Q")
    previous = b""
    start, stop_all = first + 1, end - 1
    while start < stop_all:
        cut = data.find(b"],[", start + _PIECE, stop_all)  # (a piece ends between two entries)
        stop = stop_all if cut < 0 else cut + 1
        if _ENTRIES.fullmatch(data, start, stop) is None:
            return None
        hexes = _LISTED_HEX.findall(data, start, stop)
        if not hexes[0] > previous or not all(map(bytes.__lt__, hexes, hexes[1:])):
            return None  # repeated or out of order
        previous = hexes[-1]
        digests += binascii.unhexlify(b"".join(hexes))
        for text in _LISTED_SIZE.findall(data, start, stop):
            size = int(text)
            if size > _SIZE_MAX:
                return None
            sizes.append(size)
        start = stop + 1
    return ObjectListing(bytes(digests), sizes)


def scan_actions(data: bytes | bytearray, first: int, end: int) -> ActionEntries | None:
    """The entries from their JSON at data[first:end], if that is exactly its canonical form:
    `{"blake3:<hex>":"blake3:<hex>",...}` with the keys strictly increasing; None for anything else."""
    if data[first:end] == b"{}":
        return NO_ENTRIES
    if (end - first < 2 or data[first] != 0x7B or data[end - 1] != 0x7D  # { }
            or (end - first - 1) % (_ACTION_WIDTH + 1)):
        return None
    keys = bytearray()
    records = bytearray()
    previous = b""
    step = (_PIECE // (_ACTION_WIDTH + 1)) * (_ACTION_WIDTH + 1)
    for start in range(first + 1, end - 1, step):
        stop = min(start + step, end) - 1  # (each piece whole entries, without the comma or the brace after)
        if _ACTIONS.fullmatch(data, start, stop) is None:
            return None
        hexes = _KEY_HEX.findall(data, start, stop)
        if not hexes[0] > previous or not all(map(bytes.__lt__, hexes, hexes[1:])):
            return None
        previous = hexes[-1]
        keys += binascii.unhexlify(b"".join(hexes))
        records += binascii.unhexlify(b"".join(_RECORD_HEX.findall(data, start, stop)))
    return ActionEntries(bytes(keys), bytes(records))
