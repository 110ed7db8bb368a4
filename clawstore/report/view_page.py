"""Write the `claw view` page: one HTML file with its summary, styles and script inlined, and beside it a folder of
detail shards the page loads when a run is opened (no network, no server: `<script src>` works from file://).

The layout of the page and its shards: docs/view.md (Details by module)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from clawstore.errors import UsageError
from clawstore.host.durable import (
    atomic_file,
    output_problem,
    process_alive,
    sync_filesystem,
    temp_owner,
    write_file_atomic,
)
from clawstore.values.urls import shown_text

_MARKERS = re.compile(r"/\*CLAW_STYLE\*/|/\*CLAW_SCRIPT\*/|CLAW_TITLE|CLAW_SUMMARY")
SHARD_RUNS = 256  # run details per shard: what opening a run loads, and what the writer holds at once
_SHARD = re.compile(r"details-(\d+)\.js")


@dataclass(frozen=True)
class Written:
    page_bytes: int
    detail_bytes: int  # of every shard
    shards: int
    runs: int


def page_json(value: Any) -> str:
    """A value as the page embeds it: compact, ASCII, and `<` escaped (no `</script>` can end the page's script); a
    URL in it shown as shown_url shows it (a failed request's error and its artifact name the URL it called: a record
    made before session 62 may hold a password there)."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return shown_text(text).replace("<", "\\u003c")


def _asset(name: str) -> str:
    return resources.files("clawstore.report").joinpath("view_assets", name).read_text(encoding="utf-8")


def details_dir(path: Path) -> Path:
    """Where the run details of the page at `path` go: `<page name>.d` beside it."""
    return path.with_name(path.name + ".d")


def shard_name(number: int) -> str:
    return f"details-{number:05d}.js"


def page_pieces(summary: dict[str, Any], title: str) -> Iterator[str]:
    """The page's text a piece at a time (the summary's lists an item at a time: its rows are 50,000 at 10,000 x 5),
    so that writing it holds one row's JSON, not the summary's and the page's whole text (~3 x 11 MB at 10,000 x 5)."""
    page = _asset("view.html")
    replacements = {"/*CLAW_STYLE*/": _asset("view.css"), "/*CLAW_SCRIPT*/": _asset("view.js"),
                    "CLAW_TITLE": _html_text(title)}
    at = 0
    # One pass: text put in is never searched again for markers (a case id may contain anything).
    for marker in _MARKERS.finditer(page):
        yield page[at:marker.start()]
        if marker.group(0) == "CLAW_SUMMARY":
            yield from _json_pieces({**summary, "title": title})
        else:
            yield replacements[marker.group(0)]
        at = marker.end()
    yield page[at:]


def _json_pieces(value: dict[str, Any]) -> Iterator[str]:
    """page_json(value) a piece at a time: each of its lists an item at a time (the same text and separators)."""
    yield "{"
    for number, (key, item) in enumerate(value.items()):
        yield ("," if number else "") + page_json(key) + ":"
        if (pieces := getattr(item, "json_pieces", None)) is not None:  # (view_data.SummaryRows)
            yield from pieces()
        elif isinstance(item, list) and item:
            for at, element in enumerate(item):
                yield ("," if at else "[") + page_json(element)
            yield "]"
        else:
            yield page_json(item)
    yield "}"


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_shard(token: str, number: int, details: Sequence[dict[str, Any]]) -> str:
    """One shard: a script handing its runs' details to the page (`clawDetails`), tagged with the page's token so a
    page whose shards were rewritten by a later view says so instead of showing another run."""
    return f"clawDetails({page_json(token)},{number},[\n" + ",\n".join(page_json(d) for d in details) + "\n]);\n"


def write_page(summary: dict[str, Any], details: Iterable[dict[str, Any]], heads: Sequence[str], title: str,
               path: Path) -> Written:
    """Write the shards, then the page (atomically and durably, after its shards are on disk), then remove the
    shards an earlier, larger view left. `details` are streamed, SHARD_RUNS at a time (order and bounds:
    docs/view.md)."""
    check_out(path)
    token = page_token(heads)
    runs = shards = detail_bytes = 0
    stream = iter(details)
    while batch := list(itertools.islice(stream, SHARD_RUNS)):
        detail_bytes += write_shard(path, token, shards, batch)
        runs, shards = runs + len(batch), shards + 1
    return finish_page(summary, title, path, token, Written(0, detail_bytes, shards, runs))


def check_out(path: Path) -> None:
    """UsageError when the page at `path` or its details folder cannot be written."""
    problem = output_problem("--out", path)
    if problem is not None:
        raise UsageError(problem)
    folder = details_dir(path)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise UsageError(f"--out {path}: {folder} is in the way (the run details go into a directory of that name)")


def page_token(heads: Sequence[str]) -> str:
    """The tag of a page's shards: of the heads it shows."""
    return hashlib.blake2b("\0".join(heads).encode(), digest_size=12).hexdigest()


def write_shard(path: Path, token: str, number: int, details: Sequence[dict[str, Any]]) -> int:
    """Write shard `number` of the page at `path` (not yet durable: finish_page flushes them all); its size."""
    return write_shard_body(path, number, render_shard(token, number, details).encode("ascii"))


def write_shard_body(path: Path, number: int, body: bytes) -> int:
    """write_shard of a shard rendered already."""
    folder = details_dir(path)
    try:
        folder.mkdir(exist_ok=True)
        # Not durable one by one (an fsync each cost 2 s on a 50,000-run page): one flush in finish_page for them all.
        write_file_atomic(folder / shard_name(number), body, folder, durable=False)
    except OSError as exc:
        raise UsageError(f"--out {path}: {exc.strerror or exc}") from None
    return len(body)


def finish_page(summary: dict[str, Any], title: str, path: Path, token: str, shards: Written) -> Written:
    """Once `shards.shards` shards are written: flush them, write the page (atomically and durably), remove the shards
    an earlier, larger view left."""
    folder = details_dir(path)
    try:
        if shards.shards:
            sync_filesystem(folder)
        summary = {**summary, "details": {"dir": folder.name, "per": SHARD_RUNS, "token": token, "runs": shards.runs}}
        page = 0
        with atomic_file(path) as fh:  # a hidden temp beside the page until it is whole
            for piece in page_pieces(summary, title):
                page += fh.write(piece.encode("utf-8"))
        _remove_stale(folder, shards.shards)
    except OSError as exc:
        raise UsageError(f"--out {path}: {exc.strerror or exc}") from None
    return Written(page, shards.detail_bytes, shards.shards, shards.runs)


def _remove_stale(folder: Path, shards: int) -> None:
    """Remove the shards numbered from `shards` on (an earlier view of more runs) and the temps of writers no longer
    alive; nothing else: the folder may hold what a user put there. An empty folder goes too."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        number = _SHARD.fullmatch(entry.name)
        if (number and int(number.group(1)) >= shards) or _dead_temp(entry.name):
            entry.unlink(missing_ok=True)
    if shards == 0 and not any(folder.iterdir()):
        folder.rmdir()


def _dead_temp(name: str) -> bool:
    """A shard's temp file whose writer is no longer alive."""
    owner = temp_owner(name) if name.endswith(".tmp") else None
    return owner is not None and not process_alive(*owner)


def remove_dead_temps(folder: Path) -> None:
    """Remove the shards' temp files in `folder` whose writers are dead (a view interrupted mid-write: its helper,
    killed holding one, cannot remove it), nothing else; quietly (the command is ending for another reason)."""
    try:
        for entry in folder.iterdir():
            if _dead_temp(entry.name):
                entry.unlink(missing_ok=True)
    except OSError:
        pass
