"""Entries read back in key order, held in bounded memory: sorted runs written to a scratch directory in a store's tmp/
and merged as they are read (an external merge sort). How much it holds and why: docs/store.md (Details by module)."""

from __future__ import annotations

import heapq
import itertools
import os
import weakref
from collections.abc import Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any

import msgspec

from clawstore.host.durable import temp_name
from clawstore.host.scratch import remove_tree

RUN_BYTES = 1 << 20  # entries buffered (their encoded bytes, plus ENTRY_OVERHEAD each) before a sorted run is written
FAN_IN = 32  # runs of one level merged into one of the next (also bounds the runs read at once: FAN_IN - 1 a level)
ENTRY_OVERHEAD = 256  # what an entry costs in the buffer beyond its encoded bytes (its key, the tuples)
READ_BUFFER = 1 << 15  # bytes read ahead of each run while merging

Key = tuple[Any, ...]  # JSON values (str, int) compared as a tuple
_LINE = msgspec.json.Decoder(tuple[tuple[Any, ...], msgspec.Raw])
_KEY = itemgetter(0)


class SortedRuns:
    """Add (key, encoded JSON) entries in any order, read them in key order (`sorted`, any number of times). Nothing
    touches the disk until the buffer passes `run_bytes`; the scratch directory is removed by `close` (or when the
    object is collected, or the process ends; a killed process's is a dead writer's leftover)."""

    def __init__(self, tmp_dir: Path, run_bytes: int = RUN_BYTES, fan_in: int = FAN_IN):
        self.tmp_dir = Path(tmp_dir)
        self.run_bytes, self.fan_in = run_bytes, max(2, fan_in)
        self._buffer: list[tuple[Key, bytes]] = []
        self._buffered = 0
        self._limit = run_bytes  # the buffer size that writes a run (raised while the disk refuses)
        self._levels: list[list[Path]] = []  # sorted run files, level by level (a level-n run merged fan_in^n)
        self._dir: Path | None = None
        self._names = itertools.count()
        self._cleanup: weakref.finalize | None = None

    def add(self, key: Key, payload: bytes) -> None:
        self._buffer.append((key, payload))
        self._buffered += len(payload) + ENTRY_OVERHEAD
        if self._buffered >= self._limit:
            self._spill()

    def sorted(self) -> Iterator[tuple[Key, bytes | msgspec.Raw]]:
        """Every entry (key, its encoded JSON) in key order: the runs on disk merged with the buffer."""
        self._buffer.sort(key=_KEY)
        runs = [_read(path) for level in self._levels for path in level]
        return heapq.merge(*runs, iter(self._buffer), key=_KEY) if runs else iter(self._buffer)

    def close(self) -> None:
        """Drop every entry and remove the scratch directory."""
        self._buffer, self._buffered, self._levels = [], 0, []
        if self._cleanup is not None:
            self._cleanup()
        self._dir = self._cleanup = None

    def _spill(self) -> None:
        self._buffer.sort(key=_KEY)
        try:
            path = self._write(self._buffer)
        except OSError:  # (a full disk: kept in memory, tried again once as much again has come)
            self._limit = self._buffered + self.run_bytes
            return
        self._buffer, self._buffered, self._limit = [], 0, self.run_bytes
        self._add_run(0, path)

    def _add_run(self, level: int, path: Path) -> None:
        if level == len(self._levels):
            self._levels.append([])
        runs = self._levels[level]
        runs.append(path)
        if len(runs) < self.fan_in:
            return
        try:
            merged = self._write(heapq.merge(*(_read(run) for run in runs), key=_KEY))
        except OSError:
            return  # read as they are (more runs at once)
        for run in runs:
            run.unlink(missing_ok=True)
        self._levels[level] = []
        self._add_run(level + 1, merged)

    def _write(self, entries: Iterable[tuple[Key, bytes | msgspec.Raw]]) -> Path:
        path = self._scratch() / f"{next(self._names)}.run"
        encode = msgspec.json.Encoder().encode
        try:
            with open(path, "wb") as out:  # derived data: a crash loses it with the build that wrote it
                for key, payload in entries:
                    raw = payload if isinstance(payload, msgspec.Raw) else msgspec.Raw(payload)
                    out.write(encode((key, raw)) + b"\n")
        except OSError:
            path.unlink(missing_ok=True)
            raise
        return path

    def _scratch(self) -> Path:
        if self._dir is None:
            path = self.tmp_dir / temp_name(".sorted")  # (its name says whose: store/core/leftovers.py)
            os.mkdir(path, 0o700)
            self._dir = path
            self._cleanup = weakref.finalize(self, remove_tree, path)
        return self._dir


def _read(path: Path) -> Iterator[tuple[Key, msgspec.Raw]]:
    with open(path, "rb", buffering=READ_BUFFER) as fh:
        for line in fh:
            yield _LINE.decode(line)
