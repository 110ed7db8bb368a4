"""fsck's rows grouped by pack (index entries, the records that entries and heads name): held up to a budget, the rest
spilled to one anonymous temporary file, so that fsck checks a pack's rows with only that pack in hand."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Bytes of rows held before they are spilled, as Python holds them (fsck's memory bound for what it groups; it groups
# twice at once, the index's entries and the records: 8 MiB of rows' bytes each held ~27 MB at 10,000 x 5)
BUDGET = 2 << 20
_HELD_COST = 41  # a row's bytes object's header and its list slot (sys.getsizeof(b"") + 8)


class PackRows:
    """Rows (bytes) grouped by pack; `take(pack)` returns a pack's rows (in the order added) and forgets them."""

    def __init__(self, tmp_dir: Path, file: int | None = None):
        """`file`: spill to this descriptor (another PackRows' `opened()`, in a forked helper), from its start."""
        self._tmp_dir = tmp_dir
        self._held: dict[str, list[bytes]] = {}
        self._held_bytes = 0
        self._spilled: dict[str, list[tuple[int, int]]] = {}  # pack -> (offset, length) of its runs in the file
        self._file: int | None = file
        self._end = 0

    def add(self, pack: str, row: bytes) -> None:
        rows = self._held.get(pack)
        if rows is None:
            rows = self._held[pack] = []
        rows.append(row)
        self._held_bytes += len(row) + _HELD_COST
        if self._held_bytes >= BUDGET:
            self._spill()

    def packs(self) -> set[str]:
        return set(self._held) | set(self._spilled)

    def take(self, pack: str) -> list[bytes]:
        rows: list[bytes] = []
        if self._file is not None:
            for offset, length in self._spilled.pop(pack, ()):
                data = os.pread(self._file, length, offset)
                width = (len(data) - 4) // int.from_bytes(data[:4], "little")
                rows += [data[at:at + width] for at in range(4, len(data), width)]
        held = self._held.pop(pack, [])
        self._held_bytes -= sum(len(row) for row in held) + _HELD_COST * len(held)
        return rows + held

    def opened(self) -> int:
        """The file's descriptor, made now if it is not yet (so that a process forked next spills to it)."""
        if self._file is None:
            with tempfile.TemporaryFile(dir=self._tmp_dir, prefix="fsck-") as fh:
                self._file = os.dup(fh.fileno())  # (unnamed: gone with the process, however it ends)
        return self._file

    def spilled(self) -> tuple[list[tuple[str, int, int]], int]:
        """Every row spilled: (pack, offset, length) of each run in the file, in the file's order, and its end."""
        if self._held:
            self._spill()
        runs = [(pack, offset, length) for pack, placed in self._spilled.items() for offset, length in placed]
        return sorted(runs, key=lambda run: run[1]), self._end

    def adopt(self, runs: list[tuple[str, int, int]], end: int) -> None:
        """Take the runs another PackRows spilled to this one's file (`opened()`; `spilled()`'s answer) as this one's
        rows. Only while this one holds none."""
        assert not self._held and not self._spilled and self._file is not None
        for pack, offset, length in runs:
            self._spilled.setdefault(pack, []).append((offset, length))
        self._end = end

    def _spill(self) -> None:
        self.opened()
        assert self._file is not None
        for pack, rows in self._held.items():  # a run: its row count, then its rows (all of one width)
            data = len(rows).to_bytes(4, "little") + b"".join(rows)
            done = 0
            while done < len(data):  # (a short write resumes)
                done += os.pwrite(self._file, memoryview(data)[done:], self._end + done)
            self._spilled.setdefault(pack, []).append((self._end, len(data)))
            self._end += len(data)
        self._held, self._held_bytes = {}, 0

    def close(self) -> None:
        if self._file is not None:
            os.close(self._file)
            self._file = None

    def __enter__(self) -> PackRows:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
