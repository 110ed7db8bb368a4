"""Fixed-size binary rows made from their columns: one strided copy per byte of a field, in C, instead of one struct
call per row (an index segment's object rows, a commit's action-cache entries in a pack)."""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable


def column(code: str, values: Iterable[int]) -> bytes:
    """One little-endian column of rows (an array's items are the sizes struct's "<" codes give them)."""
    found = array(code, values)
    assert found.itemsize == struct.calcsize("<" + code)
    if sys.byteorder == "big":
        found.byteswap()
    return found.tobytes()


def values(code: str, rows: bytes | bytearray, size: int, at: int) -> array:
    """The little-endian field `code` at byte `at` of each of these rows of `size` bytes (`column`'s inverse): one
    strided copy per byte of the field, no object made per row."""
    width = struct.calcsize("<" + code)
    field = bytearray(len(rows) // size * width)
    for byte in range(width):
        field[byte::width] = rows[at + byte::size]
    found = array(code)
    assert found.itemsize == width
    found.frombytes(field)
    if sys.byteorder == "big":
        found.byteswap()
    return found


def rows(size: int, n: int, *columns: bytes) -> bytearray:
    """`n` rows of `size` bytes from their columns (each `n` fields of equal width, in row order, filling the row in
    order)."""
    if 0 < n * len(columns) < size:  # few rows (a commit's one action entry): a slice a field, not a copy a byte
        return _few_rows(size, n, columns)
    made = bytearray(size * n)
    at = 0
    for values in columns:
        width = len(values) // n if n else 0
        for byte in range(width):
            made[at + byte::size] = values[byte::width]
        at += width
    return made


def _few_rows(size: int, n: int, columns: tuple[bytes, ...]) -> bytearray:
    """`rows`' bytes a row at a time: its strided copies cost one call per byte of a row whatever `n` is."""
    widths = [len(values) // n for values in columns]
    pad = bytes(size - sum(widths))
    return bytearray(b"".join([b"".join([values[row * width:(row + 1) * width]
                                         for values, width in zip(columns, widths, strict=True)]) + pad
                               for row in range(n)]))
