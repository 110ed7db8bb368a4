"""Comparing two campaign states: per model and per case score deltas, with judge and run noise."""

from clawstore.compare.delta import Comparison, Delta, compare, compare_sides
from clawstore.compare.render import render_comparison

__all__ = ["Comparison", "Delta", "compare", "compare_sides", "render_comparison"]
