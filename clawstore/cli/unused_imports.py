"""Imports the `claw` program never needs (httpx's command-line client, httpcore's trio backend), kept out of its
process to save start-up time. What they cost and why blocking them is safe: docs/design/decisions.md (Details by
module)."""

from __future__ import annotations

import sys

UNUSED = ("httpx._main", "trio")


def skip_unused_imports() -> None:
    """Make an import of each module in UNUSED fail (as if it were not installed), unless something in
    this process imported it already."""
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: `import name` raises ImportError
