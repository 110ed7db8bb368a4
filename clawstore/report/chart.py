"""Score-vs-cost bubble chart (PNG): one bubble per scored model, x = total cost, y = mean score,
area = mean run latency. A cost partly unknown is drawn at its known part with an arrow pointing right (at least);
a model whose cost is wholly unknown is not on the cost axis but in a "cost unknown" lane beside it (never at $0).
matplotlib (Agg, no display) is imported only when a chart is drawn."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import UsageError
from clawstore.host.durable import atomic_file, output_problem
from clawstore.report.data import CampaignReport, ModelSummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure

WIDTH_IN, HEIGHT_IN, DPI = 10.0, 6.5, 100  # 1000 x 650 pixels
MIN_AREA, MAX_AREA = 90.0, 520.0
LANE_RATIOS = (5, 1)  # the cost axis and, when a model's cost is wholly unknown, its lane beside it


class NoScoresError(UsageError):
    """Nothing to plot: no model of the campaign has a final score (the report itself is fine)."""


def bubble_areas(latencies: list[float | None]) -> list[float]:
    """Min-max scale latencies to bubble areas; unknown or all-equal latencies get the middle size."""
    known = [v for v in latencies if v is not None]
    middle = (MIN_AREA + MAX_AREA) / 2
    if len(known) < 2 or max(known) == min(known):
        return [middle] * len(latencies)
    low, span = min(known), max(known) - min(known)
    return [middle if v is None else MIN_AREA + (v - low) / span * (MAX_AREA - MIN_AREA) for v in latencies]


def _label(model_id: str) -> str:
    tail = model_id.rsplit("/", 1)[-1]
    return tail if len(tail) <= 22 else tail[:21] + "…"


def _unknown_note(model: ModelSummary) -> str:
    cost = model.total_cost  # (a wholly unknown one is in its lane, titled so: the name alone)
    return f" (cost ≥, {cost.unknown} of {cost.count} unknown)" if cost.unknown and not cost.all_unknown else ""


def scored_models(report: CampaignReport) -> list[ModelSummary]:
    return [m for m in report.models if m.mean_score is not None]


def write_chart(report: CampaignReport, path: Path) -> Path:
    """Draw the chart to `path` (parents created). Raises NoScoresError if no model has a score."""
    models = scored_models(report)
    if not models:
        raise NoScoresError("no model in this campaign has a final score: chart not written")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    # A model nothing of whose cost is known (a self-hosted server without a price) has no place on the cost axis:
    # at $0 it read as the cheapest. It goes in a lane of its own to the right, apart from the axis.
    unpriced = any(m.total_cost.all_unknown for m in models)
    if unpriced:
        fig, (ax, lane) = plt.subplots(1, 2, sharey=True, figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI,
                                       gridspec_kw={"width_ratios": LANE_RATIOS, "wspace": 0.08})
    else:
        fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
        lane = None
    try:
        fig.patch.set_facecolor("white")
        _draw(fig, ax, lane, models, report)
        path.parent.mkdir(parents=True, exist_ok=True)  # (the default's folders: a --chart's was checked there)
        problem = output_problem("--chart", path)
        if problem is not None:
            raise UsageError(problem)
        # Written beside and renamed into place, as the other outputs: a full disk leaves the old chart whole.
        with atomic_file(path) as out:
            fig.savefig(out, format=path.suffix[1:].lower() or "png", dpi=DPI, facecolor="white")
    except OSError as exc:
        raise UsageError(f"--chart {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path


def _draw(fig: Figure, ax: Axes, lane: Axes | None, models: list[ModelSummary], report: CampaignReport) -> None:
    from matplotlib import pyplot as plt

    ys = [m.mean_score or 0.0 for m in models]
    areas = bubble_areas([m.mean_latency_s for m in models])
    colours = plt.get_cmap("tab20")
    priced = [i for i, m in enumerate(models) if not m.total_cost.all_unknown]
    top = max((models[i].total_cost.known_usd for i in priced), default=0.0)
    for i in priced:
        m, y = models[i], ys[i]
        x = m.total_cost.known_usd  # what is known of it; an arrow says when that is only the least it cost
        ax.scatter([x], [y], s=areas[i], color=colours(i % 20), edgecolors="black", alpha=0.82, zorder=3)
        if m.total_cost.unknown:
            _at_least_arrow(fig, ax, x, y, areas[i])
        right_edge = top > 0 and x > 0.7 * top  # label on the left near the right edge, to stay inside
        ax.annotate(_label(m.model_id) + _unknown_note(m), (x, y),
                    xytext=(-12 if right_edge else 12, 6 + 8 * (i % 3)),
                    textcoords="offset points", ha="right" if right_edge else "left", fontsize=9)
    ax.set_xlim(0, top * 1.15 if top > 0 else 1.0)
    if not priced:
        ax.text(0.5, 0.5, "no model's cost is known", transform=ax.transAxes, ha="center", color="dimgray")
        ax.set_xticks([])  # (no $ scale for nothing on it)
    ax.set_ylim(max(0.0, min(ys) - 1.0), min(10.5, max(ys) + 1.0))
    ax.set_xlabel("total cost of the campaign's results (USD: runs + evaluation)")
    ax.set_ylabel("mean final score (0-10)")
    marked = "UNTRUSTED (kept apart) — " if report.untrusted_signer else ""
    partly = any(m.total_cost.unknown and not m.total_cost.all_unknown for m in models)
    note = "; → cost at least this (part unknown)" if partly else ""
    ax.set_title(f"{marked}Quality vs cost — {report.campaign_id}\nbubble area: mean run latency{note}", fontsize=11)
    ax.grid(True, alpha=0.3, zorder=0)
    if lane is not None:
        _draw_lane(lane, [i for i in range(len(models)) if i not in set(priced)], models, ys, areas, colours)


def _draw_lane(lane: Axes, indices: list[int], models: list[ModelSummary], ys: list[float], areas: list[float],
               colours: Colormap) -> None:
    """The models of wholly unknown cost, side by side at their scores, in a shaded lane with a dashed edge."""
    spread = [0.0] if len(indices) == 1 else [-0.5 + k / (len(indices) - 1) for k in range(len(indices))]
    for k, (i, x) in enumerate(zip(indices, spread, strict=True)):
        lane.scatter([x], [ys[i]], s=areas[i], color=colours(i % 20), edgecolors="black", alpha=0.82, zorder=3)
        lane.annotate(_label(models[i].model_id), (x, ys[i]), xytext=(0, (areas[i] / math.pi) ** 0.5 + 4 + 8 * (k % 3)),
                      textcoords="offset points", ha="center", fontsize=8)
    lane.set_xlim(-1.0, 1.0)
    lane.set_xticks([])
    lane.tick_params(axis="y", length=0)
    lane.set_xlabel("cost unknown")
    lane.set_facecolor("#f3f3f3")
    for side in ("left", "right", "top", "bottom"):
        lane.spines[side].set_linestyle((0, (4, 3)))
    lane.grid(True, axis="y", alpha=0.3, zorder=0)


def _at_least_arrow(fig: Figure, ax: Axes, x: float, y: float, area: float) -> None:
    """An arrow from the bubble's right edge pointing right: the cost is at least this (part of it unknown)."""
    from matplotlib.transforms import offset_copy

    edge = (area / math.pi) ** 0.5  # the bubble's radius in points
    ax.annotate("", xy=(x, y), xycoords=offset_copy(ax.transData, fig=fig, x=edge + 16, units="points"),
                xytext=(x, y), textcoords=offset_copy(ax.transData, fig=fig, x=edge + 1, units="points"),
                arrowprops={"arrowstyle": "-|>", "color": "black", "lw": 1.3}, zorder=4)
