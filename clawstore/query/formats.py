"""Render a QueryResult as an aligned table, CSV, JSON (array of objects) or Markdown."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

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
        return f"{value:.2f}" if abs(value) >= 1e5 else f"{value:.6g}"
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


def numeric_columns(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[bool]:
    """Columns whose non-null values are all numbers (right-aligned in tables)."""
    return [all(isinstance(r[i], int | float | decimal.Decimal) and not isinstance(r[i], bool)
                for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
            for i in range(len(columns))]


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[cell(v).replace("\n", " ") for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    numeric = numeric_columns(columns, rows)

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(list(columns)), "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in cells)
    return "\n".join(out) + "\n"


def render_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(v) for v in row])
    return buf.getvalue()


def render_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    objects = [{c: json_value(v) for c, v in zip(columns, row, strict=True)} for row in rows]
    return json.dumps(objects, indent=2, ensure_ascii=False) + "\n"


def render_markdown(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(esc(c) for c in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out.extend("| " + " | ".join(esc(cell(v)) for v in row) + " |" for row in rows)
    return "\n".join(out) + "\n"


def render(fmt: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    renderer = {"table": render_table, "csv": render_csv, "json": render_json, "markdown": render_markdown}
    return renderer[fmt](columns, rows)
