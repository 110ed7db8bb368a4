"""columns.rows: the same bytes whichever way the rows are made (a strided copy per byte, or a row at a time)."""

import random
import struct

from clawstore.store.core import columns


def _by_struct(size: int, fields: list[tuple[str, list]]) -> bytes:
    n = len(fields[0][1])
    fmt = "<" + "".join(code for code, _ in fields)
    pad = size - struct.calcsize(fmt)
    return b"".join(struct.pack(fmt, *(values[i] for _, values in fields)) + bytes(pad) for i in range(n))


def test_rows_equal_struct_rows_for_few_and_many_rows() -> None:
    rng = random.Random(54)
    for n in (0, 1, 2, 3, 5, 17, 40, 200):
        for pad in (0, 3):
            keys = [rng.randbytes(32) for _ in range(n)]
            kinds = [rng.randrange(256) for _ in range(n)]
            offsets = [rng.randrange(1 << 64) for _ in range(n)]
            times = [rng.randrange(-(1 << 63), 1 << 63) for _ in range(n)]
            size = 1 + 32 + 8 + 8 + pad
            made = columns.rows(size, n, bytes(kinds), b"".join(keys), columns.column("Q", offsets),
                                columns.column("q", times))
            assert isinstance(made, bytearray)
            assert bytes(made) == _by_struct(size, [("B", kinds), ("32s", keys), ("Q", offsets), ("q", times)])
