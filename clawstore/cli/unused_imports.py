"""Imports the `claw` program never needs, kept out of its process.

httpx imports its own command-line client (`httpx._main`: rich's syntax highlighting and pygments,
~70 ms) whenever those happen to be installed, and httpcore imports trio (with attrs, ~130 ms) for an
async backend claw's synchronous client never uses. Both libraries treat an ImportError there as "not
installed". Together they were a fifth of the CPU of a small `claw build`.

Only the program does this (`clawstore.cli.entry`): a process that imports claw as a library keeps
every import its own code may want.
"""

from __future__ import annotations

import sys

UNUSED = ("httpx._main", "trio")


def skip_unused_imports() -> None:
    """Make an import of each module in UNUSED fail (as if it were not installed), unless something in
    this process imported it already."""
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: `import name` raises ImportError
