"""Which way the wire (clawstore/providers/wire.py) took each reply it read: a spy for tests."""

from __future__ import annotations

from typing import Any

import pytest

from clawstore.providers import wire as wire_module
from clawstore.providers.wire import Wire


def reply_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which way each reply the wire reads is taken: "plain" (without h11) or "h11"."""
    taken: list[str] = []

    class Counted(wire_module._Plain):
        def __init__(self, *args: Any) -> None:
            taken.append("plain")
            super().__init__(*args)

    to_h11 = Wire._to_h11

    def counted_to_h11(self: Wire, *args: Any) -> None:
        taken.append("h11")
        to_h11(self, *args)

    monkeypatch.setattr(wire_module, "_Plain", Counted)
    monkeypatch.setattr(Wire, "_to_h11", counted_to_h11)
    return taken
