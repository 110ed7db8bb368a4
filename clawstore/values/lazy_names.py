"""A package's names imported on first use (PEP 562): importing one of its modules, or one name, loads only what it
needs, not every module its __init__ would have imported (clawstore.config, clawstore.store)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """The package's module `__getattr__`: `where` maps each name to its module (relative to the package); the
    value is kept in the package once imported."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
