"""Score-vs-cost bubble chart (PNG): one bubble per scored model, x = total cost, y = mean score,
area = mean run latency. matplotlib (Agg, no display) is imported only when a chart is drawn."""

from __future__ import annotations

from pathlib import Path

from clawstore.errors import UsageError
from clawstore.host.durable import atomic_file, output_problem
from clawstore.report.data import CampaignReport, ModelSummary

WIDTH_IN, HEIGHT_IN, DPI = 10.0, 6.5, 100  # 1000 x 650 pixels
MIN_AREA, MAX_AREA = 90.0, 520.0


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
    cost = model.total_cost
    return " (cost unknown)" if cost.all_unknown else f" (cost ≥; {cost.unknown} unknown)" if cost.unknown else ""


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

    xs = [m.total_cost.known_usd for m in models]  # what is known of it: the label says what is not
    ys = [m.mean_score or 0.0 for m in models]
    areas = bubble_areas([m.mean_latency_s for m in models])
    colours = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    try:
        fig.patch.set_facecolor("white")
        top = max(xs) if xs else 0.0
        for i, (m, x, y, a) in enumerate(zip(models, xs, ys, areas, strict=True)):
            ax.scatter([x], [y], s=a, color=colours(i % 20), edgecolors="black", alpha=0.82, zorder=3)
            right_edge = top > 0 and x > 0.7 * top  # label on the left near the right edge, to stay inside
            ax.annotate(_label(m.model_id) + _unknown_note(m), (x, y),
                        xytext=(-12 if right_edge else 12, 6 + 8 * (i % 3)),
                        textcoords="offset points", ha="right" if right_edge else "left", fontsize=9)
        ax.set_xlim(0, top * 1.15 if top > 0 else 1.0)
        ax.set_ylim(max(0.0, min(ys) - 1.0), min(10.5, max(ys) + 1.0))
        ax.set_xlabel("total cost of the campaign's results (USD: runs + evaluation)")
        ax.set_ylabel("mean final score (0-10)")
        marked = "UNTRUSTED (kept apart) — " if report.untrusted_signer else ""
        ax.set_title(f"{marked}Quality vs cost — {report.campaign_id}\nbubble area: mean run latency", fontsize=11)
        ax.grid(True, alpha=0.3, zorder=0)
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
