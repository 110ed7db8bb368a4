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


def rows(size: int, n: int, *columns: bytes) -> bytearray:
    """`n` rows of `size` bytes from their columns (each `n` fields of equal width, in row order, filling the row in
    order)."""
    made = bytearray(size * n)
    at = 0
    for values in columns:
        width = len(values) // n if n else 0
        for byte in range(width):
            made[at + byte::size] = values[byte::width]
        at += width
    return made
