"""`claw report`'s PNG chart never draws an unknown cost as $0 (report/chart.py): a model whose cost is wholly unknown
(a self-hosted server with no price) has its bubble in a lane of its own beside the cost axis, labelled "cost
unknown", not at x = 0 where it read as the cheapest; a model whose cost is partly unknown is drawn at its known part
with an arrow pointing right, "at least". What is plotted is read from matplotlib's objects, not from pixels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, ws  # noqa: F401
from tests.support.judging import EV
from tests.support.unpriced import AT_LEAST, SCORES, UNKNOWN, build_unpriced
from tests.support.workspace import Workspace


def _drawn(claw: Claw, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Figure:  # noqa: F811
    """`claw report --chart` run in this process (the chart drawn here, not forked): the figure it saved."""
    saved: list[Figure] = []
    real = Figure.savefig

    def keeping(self: Figure, *args: Any, **kwargs: Any) -> None:
        saved.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keeping)
    chart = tmp_path / "c.png"
    code, _, err = claw("report", "--suite", "main", "--run-profile", "rp", *EV, "--chart", str(chart))
    assert code == 0 and chart.stat().st_size > 0, err
    [figure] = saved
    figure.canvas.draw()  # (display positions, for the arrow)
    return figure


def _bubbles(ax: Axes) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for c in ax.collections if isinstance(c, PathCollection) for x, y in c.get_offsets()]


def _labels(ax: Axes) -> dict[str, Annotation]:
    return {a.get_text().split(" ")[0]: a for a in ax.texts if isinstance(a, Annotation) and a.get_text()}


def test_a_model_of_unknown_cost_is_not_drawn_at_zero_cost(ws: Workspace, claw: Claw,  # noqa: F811
                                                           standin: StandIn, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    build_unpriced(ws, standin, claw)
    figure = _drawn(claw, monkeypatch, tmp_path)
    [cost_axis] = [ax for ax in figure.axes if ax.get_xlabel().startswith("total cost")]
    # On the cost axis: m1 alone, at its known part; m2 (nothing of its cost known) is not placed there at all.
    assert set(_labels(cost_axis)) == {AT_LEAST}, [a.get_text() for a in cost_axis.texts]
    [(x, y)] = _bubbles(cost_axis)
    assert x > 0 and y == SCORES[AT_LEAST]
    # Its lane: beside the axis, titled so, its bubble at its score.
    [lane] = [ax for ax in figure.axes if ax is not cost_axis and _bubbles(ax)]
    assert "cost unknown" in lane.get_title() + lane.get_xlabel()
    assert [y for _, y in _bubbles(lane)] == [SCORES[UNKNOWN]]
    assert set(_labels(lane)) == {UNKNOWN}
    assert lane.get_window_extent().x0 > cost_axis.get_window_extent().x1  # to the right, apart
    # m1's cost is at least what is known of it: an arrow from its bubble pointing right.
    [arrow] = [a.arrow_patch for a in cost_axis.texts if isinstance(a, Annotation) and a.arrow_patch is not None]
    px, py = cost_axis.transData.transform((x, y))
    box = arrow.get_window_extent()
    assert box.x0 >= px - 1 and box.width > 5 and box.y0 - 1 <= py <= box.y1 + 1, (box, px, py)
