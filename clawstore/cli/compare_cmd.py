"""`claw compare A B`: score deltas between two campaign states, with the judge's noise."""

from __future__ import annotations

import math
from pathlib import Path

import click

from clawstore.cli.common import closed_with_command, store_option, workspace_store_dir

MAX_SAMPLES = 1_000_000  # each case's samples are held at once (a few lists of this many floats)


def _finite(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """`nan` passes a FloatRange (every comparison with it is false): as --confidence it was a traceback, as
    --margin a gate that never fails; `inf` as --margin is no gate either."""
    if not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number, got {value}")
    return value


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--output", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when some model's paired interval of B - A lies wholly below -MARGIN.")
@click.option("--margin", type=click.FloatRange(min=0.0), default=0.0, show_default=True, callback=_finite,
              help="A drop smaller than this (score points) does not fail --fail-on-regression.")
@click.option("--confidence", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True, callback=_finite,
              help="Family-wise confidence of the intervals.")
@click.option("--samples", type=click.IntRange(min=100, max=MAX_SAMPLES), default=4000, show_default=True,
              help="Bootstrap samples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap random seed.")
@click.option("--all-cases", is_flag=True,
              help="List the cases within the noise too (by default only the models and the cases beyond it).")
@store_option
def compare(a: str, b: str, output: str, fail_on_regression: bool, margin: float, confidence: float, samples: int,
            seed: int, all_cases: bool, store_dir: Path | None) -> None:
    """Compare campaign states A and B (campaign ids, pins, refs or head ids): per model and per case."""
    from clawstore.compare import compare as compare_states
    from clawstore.compare import render_comparison
    from clawstore.store import Store

    store = closed_with_command(Store(workspace_store_dir(store_dir, must_exist=True), create=False))
    comparison = compare_states(store, a, b, confidence, samples, seed, margin)
    click.echo(render_comparison(comparison, output, all_cases))
    if fail_on_regression and comparison.gate_failures:
        raise SystemExit(1)


def register(group: click.Group) -> None:
    group.add_command(compare)
