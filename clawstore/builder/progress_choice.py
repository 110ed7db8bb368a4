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
                  planned_layers: Mapping[str, Mapping[str, int]] | None = None,
                  planned_minimum: bool = False) -> BuildProgress:
    """`planned_layers`: the plan's nodes by layer, which the live display counts before each layer begins;
    `planned_minimum`: the planned cost is a floor (shown `≥`, not `~`)."""
    stream = stream or sys.stderr
    mode = display_mode(mode, stream)
    progress: BuildProgress
    if mode == "live":
        from clawstore.builder.progress_live import LiveProgress

        progress = LiveProgress(stream, planned_cost_usd, planned_layers)
    elif mode == "plain":
        progress = PlainProgress(stream, planned_cost_usd)
    elif mode == "json":
        progress = JsonProgress(stream, planned_cost_usd)
    else:
        progress = QuietProgress(planned_cost_usd)
    progress.planned_minimum = planned_minimum
    return progress


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False
