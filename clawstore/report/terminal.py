"""Tables for a person at a terminal, drawn with rich: aligned numbers, colour for pass/fail/stale.

Only for a terminal: piped output and every `--format`/`--output` other than the default stay plain
and stable for scripts (the callers decide with `stdout_is_terminal`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

# A cell whose whole text is one of these words is coloured (case-insensitive).
WORD_STYLES = {
    **dict.fromkeys(("ok", "success", "passed", "pass", "fresh", "true", "exec"), "green"),
    **dict.fromkeys(("fail", "failed", "error", "provider_error", "timed_out", "invalid", "incomplete", "false",
                     "missing", "blocked", "interrupted"), "bold red"),
    **dict.fromkeys(("stale", "never-built", "skip", "skipped", "running"), "yellow"),
    **dict.fromkeys(("reuse", "null", "n/a", "-"), "dim"),
}


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False


def _console() -> Any:
    from rich.console import Console

    return Console(file=sys.stdout, highlight=False)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool],
          title: str | None = None, zero_dim: bool = False,
          nonzero_styles: Sequence[str | None] | None = None) -> Any:
    """A rich Table of text cells; `numeric` columns are right-aligned, zeros dimmed if `zero_dim`, and a
    column with a `nonzero_styles` entry shows its non-zero counts in that style (e.g. failed in red)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    out = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                header_style="bold cyan", pad_edge=False)
    for header, num in zip(headers, numeric, strict=True):
        out.add_column(header, justify="right" if num else "left", no_wrap=num)
    for row in rows:
        cells = []
        for index, (text, num) in enumerate(zip(row, numeric, strict=True)):
            style = WORD_STYLES.get(text.strip().lower(), "")
            zero = text.strip() in ("0", "0.00000")
            if num and zero_dim and zero:
                style = "dim"
            elif nonzero_styles and nonzero_styles[index] and not zero:
                style = nonzero_styles[index] or ""
            cells.append(Text(text, style=style))
        out.add_row(*cells)
    return out


def print_tables(*parts: Any) -> None:
    """Print rich renderables and plain strings (never read as markup: ids may hold brackets) to stdout."""
    from rich.text import Text

    console = _console()
    for part in parts:
        console.print(Text(part) if isinstance(part, str) else part)
