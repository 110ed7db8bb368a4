"""Which display a build's progress goes to (`claw build --progress`): live on a terminal (rich, imported
only then), plain lines otherwise, JSON lines for dashboards, or counts alone."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

from clawstore.builder.progress import BuildProgress, JsonProgress, PlainProgress, QuietProgress


def display_mode(mode: str, stream: TextIO | None = None) -> str:
    """`--progress` with `auto` decided: live on a terminal (stderr unless `stream`), plain otherwise."""
    if mode != "auto":
        return mode
    return "live" if _is_terminal(stream or sys.stderr) else "plain"


def open_progress(mode: str, stream: TextIO | None = None, planned_cost_usd: float | None = None,
                  planned_layers: Mapping[str, Mapping[str, int]] | None = None) -> BuildProgress:
    """`planned_layers`: the plan's nodes by layer, which the live display counts before each layer begins."""
    stream = stream or sys.stderr
    mode = display_mode(mode, stream)
    if mode == "live":
        from clawstore.builder.progress_live import LiveProgress

        return LiveProgress(stream, planned_cost_usd, planned_layers)
    if mode == "plain":
        return PlainProgress(stream, planned_cost_usd)
    if mode == "json":
        return JsonProgress(stream, planned_cost_usd)
    return QuietProgress(planned_cost_usd)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False
