"""Rows written to files as they are flattened, so that indexing a campaign holds a window of it, not all of it."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from clawstore.query import copied
from clawstore.query.jsonarray import ArrayWriter, encode
from clawstore.query.rows import Row, RowMeta

CHUNK = 1024  # rows of a table held before they are written (5 tables of 4,096 rows of ~3 KB held 60 MB)
HELD = "held.jsonl"  # result rows waiting for their run's costs, CHUNK to a line
_HeldLine = list[tuple[int, dict[str, Any] | None, str | None]]


class Spill:
    """The RowSink (rows.py) that writes the rows of each table with hidden columns (copied.py), with them, to
    `<directory>/<table>.json` as JSON arrays for `segments.write_tables` to read: at most CHUNK rows of
    each table, and CHUNK held results, are in memory at once. `close` before reading the files;
    `remove` the directory when done (or on failure)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.tables: dict[str, list[Row]] = {}
        self.meta: dict[str, list[RowMeta]] = {}
        self._writers = {table: ArrayWriter(directory / f"{table}.json", CHUNK) for table in copied.HIDDEN}
        self._count: Counter[str] = Counter()
        self._held: IO[bytes] = open(directory / HELD, "w+b")  # noqa: SIM115 (closed by close())
        self._batch: list[tuple[int, Row | None, str | None]] = []

    @property
    def spilled(self) -> Path:
        return self.directory

    def add(self, table: str, row: Row, meta: RowMeta) -> None:
        if table not in copied.HIDDEN:  # (the builds row: one)
            self.tables.setdefault(table, []).append(row)
            return
        row.update(copied.hidden_values(table, meta, self._count[table]))  # (the row is the flattener's to give)
        self._count[table] += 1
        self._writers[table].add(row)

    def hold(self, at: int, row: Row | None, run_key: str | None) -> None:
        self._batch.append((at, row, run_key))
        if len(self._batch) >= CHUNK:
            self._flush_held()

    def _flush_held(self) -> None:
        if self._batch:
            self._held.write(encode(self._batch) + b"\n")
            self._batch.clear()

    def held(self) -> Iterator[tuple[int, Row | None, str | None]]:
        """The held results in the order held, read back a line at a time."""
        self._flush_held()
        self._held.seek(0)
        for line in self._held:
            yield from msgspec.json.decode(line, type=_HeldLine)
        self._held.truncate(0)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._held.close()

    def remove(self) -> None:
        for writer in self._writers.values():
            writer.discard()
        self._held.close()
        shutil.rmtree(self.directory, ignore_errors=True)
