"""Imports the `claw` program never needs (httpx's command-line client, httpcore's trio backend, pydantic's search for
plugins), kept out of its process to save start-up time. What they cost and why blocking them is safe:
docs/design/decisions.md (Details by module)."""

from __future__ import annotations

import sys
from types import ModuleType

UNUSED = ("httpx._main", "trio")
PYDANTIC_PLUGINS = "pydantic.plugin._loader"


def skip_unused_imports() -> None:
    """Make an import of each module in UNUSED fail (as if it were not installed), unless something in
    this process imported it already; and give pydantic no plugins (`_no_plugins`)."""
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: `import name` raises ImportError
    sys.modules.setdefault(PYDANTIC_PLUGINS, _no_plugins())


def _no_plugins() -> ModuleType:
    """pydantic's plugin loader as if no distribution offered a plugin: the real one reads every installed
    distribution's entry points (importlib.metadata, ~15 ms) when a model first validates, for plugins that would
    watch the validation of claw's own configs."""
    loader = ModuleType(PYDANTIC_PLUGINS)
    loader.get_plugins = tuple  # type: ignore[attr-defined]  # (get_plugins(): none)
    return loader
