"""Values made a window of cases at a time, given back in the order of the whole campaign planned at once.

A window (graph/plan.py `window_items`) holds whole cases, every model of each: its runs come models, then cases,
then its evaluation nodes in the order of their runs. The whole campaign planned in one window lists every run
(models, then cases) before every evaluation node. So the whole order is the windows' values taken section by
section (runs, then evaluations), model by model, window by window. `InOrder` keeps each window's values in a
temporary file (unlinked at once: nothing is left behind, whatever ends the process), a block per section and
model, and reads them back in that order: what a read command prints in the campaign's order takes the memory of
one window, not of the campaign (docs/building.md, Without a stamp).
"""

from __future__ import annotations

import marshal
import tempfile
from collections.abc import Iterator
from typing import Any

SECTIONS = ("runs", "evaluations")


class InOrder:
    """`add` a window's values (each marshal-able: plain JSON-like values) as they are made, `end_window` after each
    window; iterating gives them in the whole campaign's order, once."""

    def __init__(self, model_ids: list[str]):
        self._models = {model_id: index for index, model_id in enumerate(model_ids)}
        self._window: dict[tuple[int, int], list[Any]] = {}
        self._blocks: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (section, model) -> its blocks' places
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed once read back (or with this object)

    def add(self, kind: str, model_id: str, value: Any) -> None:
        self._window.setdefault((0 if kind == "run" else 1, self._models[model_id]), []).append(value)

    def end_window(self) -> None:
        for place, values in self._window.items():
            data = marshal.dumps(values)
            self._blocks.setdefault(place, []).append((self._file.tell(), len(data)))
            self._file.write(data)
        self._window = {}

    def __iter__(self) -> Iterator[Any]:
        self.end_window()
        try:
            for place in sorted(self._blocks):
                for offset, size in self._blocks[place]:
                    # (a block read whole, then decoded: `marshal.load` of the file reads it a field at a time, a
                    # call each: a fifth of `claw explain`'s time at 200,000 nodes)
                    self._file.seek(offset)
                    yield from marshal.loads(self._file.read(size))
        finally:
            self._file.close()
