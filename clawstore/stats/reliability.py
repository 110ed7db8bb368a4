"""How much a judge disagrees with itself: its repetitions on the same run, per judge and dimension (mean absolute
difference, ICC(1)). The formulas: docs/compare.md (Details by module)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reliability:
    runs: int  # groups with two or more repetitions
    mad: float
    icc: float | None  # None: undefined (fewer than two runs, or no variation at all)
    flip_share: float | None  # None: no pass threshold

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 6)  # noqa: E731
        return {"runs": self.runs, "mad": r(self.mad), "icc": r(self.icc), "flip_share": r(self.flip_share)}


def _pairwise(scores: Sequence[float]) -> float:
    if len(scores) == 2:  # (the common case, and the hot one over 10,000 runs)
        return abs(scores[0] - scores[1])
    pairs = [abs(x - y) for i, x in enumerate(scores) for y in scores[i + 1:]]
    return sum(pairs) / len(pairs)


def icc1(groups: Sequence[Sequence[float]]) -> float | None:
    g = len(groups)
    sizes = [len(x) for x in groups]
    total = sum(sizes)
    if g < 2 or total <= g:
        return None
    sums = [sum(x) for x in groups]
    between_sq = sum(s * s / n for s, n in zip(sums, sizes, strict=True))  # Σ k·mean²
    squares = sum(v * v for x in groups for v in x)
    msb = max(0.0, between_sq - sum(sums) ** 2 / total) / (g - 1)  # (max: rounding below 0 when all agree)
    msw = max(0.0, squares - between_sq) / (total - g)
    k0 = (total - sum(n * n for n in sizes) / total) / (g - 1)
    denominator = msb + (k0 - 1) * msw
    return None if denominator <= 1e-12 else (msb - msw) / denominator


def reliability(groups: Sequence[Sequence[float]], threshold: float | None = None) -> Reliability | None:
    """The judge's self-agreement over runs it scored two or more times; None when there are none."""
    groups = [x for x in groups if len(x) >= 2]
    if not groups:
        return None
    flips = None
    if threshold is not None:
        flips = sum(min(x) < threshold <= max(x) for x in groups) / len(groups)
    return Reliability(len(groups), sum(map(_pairwise, groups)) / len(groups), icc1(groups), flips)
