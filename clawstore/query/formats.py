"""Write query rows as an aligned table, CSV, JSON (array of objects) or Markdown: a batch at a time (`claw query`
streams them), or a result held in memory (`render`)."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from json.encoder import encode_basestring as _encode_string  # (json.dumps's own, ensure_ascii=False)
from typing import IO, Any

import msgspec

FORMATS = ("table", "csv", "json", "markdown")


def json_value(value: Any) -> Any:
    """A value json.dumps accepts, keeping numbers numbers and nesting nested."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID | dt.timedelta):
        return str(value)
    return str(value)


def cell(value: Any) -> str:
    """Short human text for table and Markdown cells."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if abs(value) >= 1e5:
            return f"{value:.2f}"
        text = f"{value:.6g}"  # (positional below 1e-4 too: a run's cost of 1.2e-07 USD beside 0.0123, read as 1.2)
        return text if "e" not in text else f"{value:.{5 - math.floor(math.log10(abs(value)))}f}".rstrip("0")
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, list | dict | tuple):
        return json.dumps(json_value(value), ensure_ascii=False)
    return str(json_value(value))


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | dict | tuple):
        return json.dumps(json_value(value), ensure_ascii=False)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(json_value(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool)


def numeric_columns(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[bool]:
    """Columns whose non-null values are all numbers (right-aligned in tables)."""
    return [all(_is_number(r[i]) for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
            for i in range(len(columns))]


Rows = Sequence[Sequence[Any]]
Emit = Callable[[str], Any]


def write_table(columns: Sequence[str], batches: Iterable[Rows], emit: Emit, spill: IO[bytes] | None = None) -> int:
    """Aligned columns: every cell is made and measured first, kept in `spill` (a temp file unless given), then
    read back a batch at a time and padded, so that memory holds a batch whatever the row count. How many rows."""
    widths = [len(c) for c in columns]
    numbers = [True] * len(columns)  # (no value but numbers so far)
    values = [False] * len(columns)  # (a non-null value seen)
    count = 0
    with spill or tempfile.TemporaryFile() as kept:
        for batch in batches:
            if not batch:
                continue
            cells = [[cell(v).replace("\n", " ") for v in row] for row in batch]
            for i, texts in enumerate(zip(*cells, strict=True)):  # (a column at a time: a third of the time per cell)
                widths[i] = max(widths[i], *map(len, texts))
                if numbers[i]:
                    present = [row[i] for row in batch if row[i] is not None]
                    values[i] = values[i] or bool(present)
                    numbers[i] = all(map(_is_number, present))
            kept.write(msgspec.json.encode(cells) + b"\n")
            count += len(batch)
        numeric = [n and v for n, v in zip(numbers, values, strict=True)]

        def line(texts: Sequence[str]) -> str:
            parts = [t.rjust(w) if num else t.ljust(w) for t, w, num in zip(texts, widths, numeric, strict=True)]
            return "  ".join(parts).rstrip()

        emit(line(list(columns)) + "\n" + "  ".join("-" * w for w in widths) + "\n")
        kept.seek(0)
        for spilled in kept:
            emit("".join(line(texts) + "\n" for texts in msgspec.json.decode(spilled, type=list[list[str]])))
    return count


def _csv_lines(rows: Iterable[Sequence[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def write_csv(columns: Sequence[str], batches: Iterable[Rows], emit: Emit) -> int:
    emit(_csv_lines([columns]))
    count = 0
    for batch in batches:
        emit(_csv_lines([_csv_cell(v) for v in row] for row in batch))
        count += len(batch)
    return count


def _json_text(value: Any) -> str:
    """What json.dumps(value, indent=2, ensure_ascii=False) writes for a cell of an object in a list (four spaces in),
    without its per-call cost for the plain values most cells hold."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode_string(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value) if math.isfinite(value) else "null"
    return json.dumps(json_value(value), indent=2, ensure_ascii=False).replace("\n", "\n    ")


def write_json(columns: Sequence[str], batches: Iterable[Rows], emit: Emit) -> int:
    """One array of objects, as json.dumps(objects, indent=2, ensure_ascii=False) wrote it, an object at a time.
    A name said twice is one key, where it first stands, holding the last value (as a dict made it)."""
    last = {c: i for i, c in enumerate(columns)}
    keys = [f"\n    {_encode_string(c)}: " for c in last]
    picks = list(last.values()) if len(last) < len(columns) else None
    count = 0
    for batch in batches:
        if not batch:
            continue
        rows = batch if picks is None else [[row[i] for i in picks] for row in batch]
        objects = ["{" + ",".join(k + _json_text(v) for k, v in zip(keys, row, strict=True)) + "\n  }"
                   for row in rows]
        emit(("[\n  " if not count else ",\n  ") + ",\n  ".join(objects))
        count += len(batch)
    emit("\n]\n" if count else "[]\n")
    return count


def write_markdown(columns: Sequence[str], batches: Iterable[Rows], emit: Emit) -> int:
    def esc(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    emit("| " + " | ".join(esc(c) for c in columns) + " |\n" + "|" + "|".join("---" for _ in columns) + "|\n")
    count = 0
    for batch in batches:
        emit("".join("| " + " | ".join(esc(cell(v)) for v in row) + " |\n" for row in batch))
        count += len(batch)
    return count


WRITERS: dict[str, Callable[[Sequence[str], Iterable[Rows], Emit], int]] = {
    "table": write_table, "csv": write_csv, "json": write_json, "markdown": write_markdown}


def render(fmt: str, columns: Sequence[str], rows: Rows) -> str:
    """The whole text of a result held in memory."""
    parts: list[str] = []
    if fmt == "table":
        write_table(columns, [rows], parts.append, io.BytesIO())
    else:
        WRITERS[fmt](columns, [rows], parts.append)
    return "".join(parts)


def render_table(columns: Sequence[str], rows: Rows) -> str:
    return render("table", columns, rows)


def render_markdown(columns: Sequence[str], rows: Rows) -> str:
    return render("markdown", columns, rows)
