"""A sealed build log read with its nodes left in its file: what indexing a build for the query needs, in memory
bounded by one node and a chunk of the file, where `read_build_log` holds all of its nodes (~0.9 KB of Python a node:
177 MB for a 10,000 x 5 campaign's log of 200,000 nodes). docs/query.md (Scale: memory of the manifest refresh)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from clawstore.errors import StoreError
from clawstore.store.buildlogs import journal_entries, journal_path, read_build_log
from clawstore.store.documents import BUILD_LOG_FORMAT, JOURNALED_FORMAT, BuildLogDoc, read_build_log_doc

CHUNK = 1 << 20  # characters read at a time
_DECODER = json.JSONDecoder()  # (json.loads's: the same values, NaN and duplicate keys alike)
_SPACE = re.compile(r"[ \t\n\r]*")
_NODES = "nodes"
_LIST = object()  # yielded as a name where the log's nodes list begins
_NODE = object()  # and as the name of each of its nodes


class _Twice(Exception):
    """The log names its nodes twice: json.loads keeps the last list; such a log is read whole."""


class _Scanner:
    """JSON values read one at a time from a text file, a chunk at a time."""

    def __init__(self, fh: IO[str]):
        self._fh, self._buf, self._pos, self._eof = fh, "", 0, False

    def _more(self) -> bool:
        if self._eof:
            return False
        chunk = self._fh.read(max(CHUNK, len(self._buf) - self._pos))  # (a long value: doubled, not re-read)
        if not chunk:
            self._eof = True
            return False
        self._buf, self._pos = self._buf[self._pos:] + chunk, 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            self._pos = _SPACE.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf) or not self._more():
                return self._buf[self._pos:self._pos + 1]

    def take(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r}")
        self._pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                if not self._more():
                    raise
                continue
            if end == len(self._buf) and self._more():
                continue  # (a number may go on in the next chunk)
            self._pos = end
            return value

    def fields(self) -> Iterator[tuple[object, Any]]:
        """The top-level object's fields as (name, value), but a nodes list: (`_LIST`, None), then (`_NODE`, node)
        for each of its nodes."""
        self.take("{")
        if self.peek() == "}":
            self._pos += 1
        else:
            seen = False
            while True:
                name = self.value()
                if not isinstance(name, str):
                    raise ValueError("expected a field's name")
                self.take(":")
                if name == _NODES:
                    if seen:
                        raise _Twice
                    seen = True
                    yield from self._items()
                else:
                    yield name, self.value()
                if self._ended("}"):
                    break
        if self.peek():
            raise ValueError("extra data after the log")

    def _items(self) -> Iterator[tuple[object, Any]]:
        if self.peek() != "[":
            yield _NODES, self.value()  # (not a list: read_build_log_doc names it)
            return
        self._pos += 1
        yield _LIST, None
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            yield _NODE, self.value()
            if self._ended("]"):
                return

    def _ended(self, close: str) -> bool:
        """After a value: the container's end (`close`, taken), or a comma (taken) before the next value."""
        following = self.peek()
        self._pos += 1
        if following not in (close, ","):
            raise ValueError(f"expected ',' or {close!r}")
        return following == close


class _CountedNodes:
    """Nodes read from a file as they are asked for, counted when first read: a sized, truthy sequence."""

    path: Path
    count: int

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0


class StreamedNodes(_CountedNodes):
    """A sealed log's nodes, each read from its file as it is asked for (as often as it is iterated); StoreError
    naming the file if it no longer holds the nodes counted when it was first read."""

    def __init__(self, path: Path, count: int):
        self.path, self.count = path, count

    def __iter__(self) -> Iterator[Any]:
        given = 0
        for name, value in _scan(self.path):
            if name is _NODE:
                given += 1
                if given > self.count:
                    break
                yield value
        if given != self.count:
            raise StoreError(f"{self.path}: build log changed while read ({given} nodes, {self.count} before)")


class JournalNodes(_CountedNodes):
    """A killed build's nodes (its log's format 3), each read from its journal as it is asked for, the fix lines
    applied as read_journal applies them: read_journal held them all (~1.4 KB a node: +286 MB of the first `claw query`
    of the history after a 10,000 x 5 build was killed late). Made, the journal is read through once: a line that is
    not JSON is a StoreError then, as read_journal raised it; if it no longer holds the nodes counted, when iterated."""

    def __init__(self, path: Path):
        self.path, self.count = path, 0
        self._fixed: set[int] = set()  # nodes a fix line failed after all (few)
        self._plain: set[int] = set()  # nodes that are not objects (no fix applies to them: none in claw's journals)
        for entry in journal_entries(path):
            fix = entry.get("fix") if isinstance(entry, dict) else None
            if type(fix) is int and 0 <= fix < self.count and fix not in self._plain:
                self._fixed.add(fix)
            elif fix is None:
                if not isinstance(entry, dict):
                    self._plain.add(self.count)
                self.count += 1

    def __iter__(self) -> Iterator[Any]:
        given = 0
        for entry in journal_entries(self.path):
            if isinstance(entry, dict) and entry.get("fix") is not None:
                continue
            if given == self.count:
                given += 1
                break
            yield {**entry, "action": "fail", "record": None} if given in self._fixed else entry
            given += 1
        if given != self.count:
            raise StoreError(f"{self.path}: build log journal changed while read ({given} nodes or more, "
                             f"{self.count} before)")


def _scan(path: Path) -> Iterator[tuple[object, Any]]:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            yield from _Scanner(fh).fields()
    except FileNotFoundError:
        raise StoreError(f"no build log {path}") from None
    except (OSError, ValueError) as exc:  # (a JSONDecodeError, a UnicodeDecodeError are ValueErrors)
        raise StoreError(f"{path}: unreadable build log ({exc})") from None


def read_build_log_streamed(path: Path) -> BuildLogDoc:
    """read_build_log, but a sealed log's nodes stay in its file (`StreamedNodes`): the file is read through once to
    check it and count them. A running build's log (its nodes in its journal), or one that names its nodes twice, is
    read as read_build_log reads it."""
    fields: dict[str, Any] = {}
    count = 0
    try:
        for name, value in _scan(path):
            if name is _NODE:
                count += 1
            elif name is _LIST:
                fields[_NODES] = []
            else:
                fields[str(name)] = value
    except _Twice:
        return read_build_log(path)
    doc = read_build_log_doc(fields, str(path))
    if doc.format == JOURNALED_FORMAT:  # (a killed build's: its nodes in its journal, as read_build_log reads them)
        doc.nodes, doc.format = JournalNodes(journal_path(path)), BUILD_LOG_FORMAT  # type: ignore[assignment]
        return doc
    doc.nodes = StreamedNodes(path, count)  # type: ignore[assignment]
    return doc
