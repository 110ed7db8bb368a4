"""Rows handed to DuckDB as a JSON array in a file (read back with `read_json(..., format='array')`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from clawstore.values.jsontext import without_lone_surrogates

CHUNK = 4096
# msgspec writes the rows of a 40,000-node campaign in a ninth of the time json.dumps took (0.32 s
# against 2.8 s, a quarter of indexing it). It writes NaN and infinities as null, as a cell that cannot
# hold them is (query/rows.py), where json.dumps refused them or wrote what is not JSON.
_ENCODER = msgspec.json.Encoder()


class ArrayWriter:
    """One JSON array written as its items come, `chunk` of them per encoder call: one call per item took
    twice as long (its fixed cost, 160,000 times for a 40,000-node build), one call for all held the
    whole text and every item at once. Holds at most `chunk` items."""

    def __init__(self, path: Path, chunk: int = CHUNK):
        self._fh = open(path, "wb")  # noqa: SIM115 (closed by close())
        self._fh.write(b"[")
        self._chunk, self._wrote = chunk, False
        self._batch: list[Any] = []

    def add(self, item: Any) -> None:
        self._batch.append(item)
        if len(self._batch) >= self._chunk:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            self._fh.write((b"," if self._wrote else b"") + encode(self._batch)[1:-1])
            self._wrote = True
            self._batch.clear()

    def close(self) -> None:
        if not self._fh.closed:
            self._flush()
            self._fh.write(b"]")
            self._fh.close()

    def discard(self) -> None:
        """Close without finishing the array (the caller removes the file)."""
        self._batch.clear()
        self._fh.close()


def write_array(path: Path, items: Iterable[Any], chunk: int = CHUNK) -> None:
    """Write `items` as one JSON array (ArrayWriter)."""
    writer = ArrayWriter(path, chunk)
    try:
        for item in items:
            writer.add(item)
    except BaseException:
        writer.discard()
        raise
    writer.close()


def encode(batch: list[Any]) -> bytes:
    """The batch as a JSON array. A string holding a lone surrogate (a record pulled or imported from a
    hostile store can) is written with U+FFFD in its place: UTF-8 cannot hold one, nor DuckDB read it."""
    try:
        return _ENCODER.encode(batch)
    except UnicodeEncodeError:
        return _ENCODER.encode(without_lone_surrogates(batch))
