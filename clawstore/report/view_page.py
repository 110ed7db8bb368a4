"""Write the `claw view` page: one HTML file with its data, styles and script inlined (no network).

The data's layout inside the page: docs/view.md (Details by module)."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from clawstore.errors import UsageError
from clawstore.host.durable import atomic_file
from clawstore.report.view_data import ViewData

_MARKERS = re.compile(r"/\*CLAW_STYLE\*/|/\*CLAW_SCRIPT\*/|CLAW_TITLE|CLAW_SUMMARY|CLAW_DETAILS")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _asset(name: str) -> str:
    return resources.files("clawstore.report").joinpath("view_assets", name).read_text(encoding="utf-8")


def render_page(data: ViewData, title: str) -> str:
    lines = [_json(d) for d in data.details]
    index, offset = [], 1  # the element's text starts with a newline
    for line in lines:
        index.append([offset, len(line)])
        offset += len(line) + 1
    summary = {**data.summary, "title": title, "detail_index": index}
    page = _asset("view.html")
    replacements = {
        "/*CLAW_STYLE*/": _asset("view.css"),
        "/*CLAW_SCRIPT*/": _asset("view.js"),
        "CLAW_TITLE": _html_text(title),
        "CLAW_SUMMARY": _json(summary),
        "CLAW_DETAILS": "\n" + "\n".join(lines) + "\n",
    }
    # One pass: text put in is never searched again for markers (a case id may contain anything).
    return _MARKERS.sub(lambda m: replacements[m.group(0)], page)


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_page(data: ViewData, title: str, path: Path) -> int:
    """Write atomically (a reader never sees half a page). Returns the size in bytes."""
    body = render_page(data, title).encode("utf-8")
    parent = path.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"--out {path}: directory {parent} does not exist")
    try:
        with atomic_file(path) as fh:  # a hidden temp beside the page until it is whole
            fh.write(body)
    except OSError as exc:
        raise UsageError(f"--out {path}: {exc.strerror}") from None
    return len(body)
