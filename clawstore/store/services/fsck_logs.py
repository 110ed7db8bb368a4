"""fsck's check of a build log (`builds/*.json`): a JSON object a query can index, read a piece at a time.

A campaign's log is a node a run, ~270 bytes each (55 MB at 10,000 x 5): read whole it was fsck's peak. A log as claw
writes it — `{...,"nodes":[{...},{...},...],...}` — is read LOG_PIECE bytes at a time: each piece of the nodes list
that ends at a node's end is checked as JSON on its own, and the log's other fields with the last piece only. Any log
this cannot vouch for that way (no top-level `"nodes":[` in its first piece, a piece that does not read, a node that
does not end in one) is judged read whole, as before, so a damaged log is named exactly as it was.

Why the pieces vouch for the whole: the log is `H "nodes":[ P1,P2,...,Pk,R` and `H "nodes":[R` reads as JSON with
`"nodes"` a top-level key (H ends with `{` or `,` and `H "nodes":[]}` reads), so its `[` opens an array whose content
(R up to its `]`) starts with a node's `{`; each `[Pi]` reads, so inserting `P1,...,Pk,` into that array reads too.
The fields other than nodes are the same bytes in both; nodes are skipped unmade either way (msgspec.Raw).
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import msgspec

from clawstore.errors import StoreError
from clawstore.store.documents import read_build_log_doc

# Bytes of a build log read at once: fsck holds a few times this for a log of any size in claw's layout (the piece, the
# bytes since the last node's start, the piece checked and its copy: tests/store/test_fsck_build_logs.py holds 8x)
LOG_PIECE = 256 << 10
_NODES = b'"nodes":['
_BETWEEN = b"},{"  # (between two nodes; inside a string or a node the piece before it does not read: then whole)
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_UTF8 = 1 << 20


def build_log_problem(path: Path) -> str | None:
    """Why `path` is not a readable build log (None if it is one)."""
    try:
        doc = _streamed_fields(path)
        if doc is None:
            data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({type(exc).__name__}: {str(exc)[:80]})"
    if doc is None:
        return _whole_log_problem(path.name, data)
    return _doc_problem(path.name, doc)


def _whole_log_problem(name: str, data: bytes) -> str | None:
    """The log judged read whole (what any log was judged by before LOG_PIECE)."""
    doc = _log_fields(data)
    if doc is None:  # (not what the quick reading takes: judged as it always was)
        try:
            doc = json.loads(data)
        except ValueError as exc:
            return f"unreadable ({type(exc).__name__}: {str(exc)[:80]})"
    return _doc_problem(name, doc)


def _doc_problem(name: str, doc: object) -> str | None:
    try:
        read_build_log_doc(doc, name)
    except StoreError as exc:
        return str(exc).removeprefix(f"{name}: ")
    return None


def _log_fields(data: bytes) -> dict[str, Any] | None:
    """A build log's fields with its nodes list left unmade (what fsck checks of it; a campaign's log holds a node a
    run: ~270 bytes each, about 5x that as Python objects), if it is well-formed UTF-8 JSON msgspec reads."""
    try:
        fields = _FIELDS.decode(data)
        nodes = fields.get("nodes")
        doc = {name: msgspec.json.decode(raw) for name, raw in fields.items() if name != "nodes"}
        if nodes is not None:
            doc["nodes"] = [] if bytes(memoryview(nodes)[:1]) == b"[" else msgspec.json.decode(nodes)
        utf8 = codecs.getincrementaldecoder("utf-8")()  # (msgspec checks the strings it makes, not those it skips)
        for at in range(0, len(data), _UTF8):
            utf8.decode(data[at:at + _UTF8])
        utf8.decode(b"", final=True)
    except ValueError:  # (msgspec's errors and UnicodeDecodeError are ValueErrors)
        return None
    return doc


def _streamed_fields(path: Path) -> dict[str, Any] | None:
    """The log's fields as `_log_fields` makes them, read LOG_PIECE at a time; None when the log is not in claw's
    layout or something does not read (it is then read whole and judged as before). Raises OSError."""
    utf8 = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as fh:
        first = fh.read(LOG_PIECE)
        at = first.find(_NODES)
        if at < 1 or first[at - 1:at] not in (b"{", b",") or not _reads(first[:at] + b'"nodes":[]}'):
            return None
        head, rest = first[:at + len(_NODES)], first[at + len(_NODES):]
        try:
            utf8.decode(first)
            del first
            while piece := fh.read(LOG_PIECE):
                utf8.decode(piece)
                rest += piece
                end = rest.rfind(_BETWEEN)
                if end < 0:
                    if len(rest) > 2 * LOG_PIECE:
                        return None  # (a node longer than a piece: not claw's)
                    continue
                checked = bytearray(b'{"n":[')  # (at the depth the nodes have in the log: one nested too deep
                checked += memoryview(rest)[:end + 1]  # for msgspec fails alike)
                checked += b"]}"
                if not rest.startswith(b"{") or not _reads(checked):
                    return None
                del checked
                rest = rest[end + 2:]
            utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            return None
    if not rest.startswith(b"{"):
        return None
    return _log_fields(head + rest)


def _reads(data: bytes | bytearray) -> bool:
    try:
        _FIELDS.decode(data)
    except msgspec.DecodeError:
        return False
    return True
