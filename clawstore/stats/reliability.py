"""How much a judge disagrees with itself: its repetitions on the same run, per judge and dimension.

Each group is one run's scores from one judge's repetitions (two or more). Over the groups:
- mean absolute difference: the mean over groups of the mean |x_i - x_j| over pairs of repetitions;
- ICC(1): the one-way random-effects intraclass correlation, (MSB - MSW) / (MSB + (k0 - 1)·MSW), with
  MSB and MSW the between- and within-group mean squares and k0 = (N - Σk²/N) / (g - 1) the group size
  (unequal sizes allowed): 1 when repetitions agree perfectly, 0 or below when the judge's noise is as
  large as the differences between runs;
- flip share: the share of groups in which some repetition is at or above the pass threshold and
  another below it (each judgement read alone as a verdict).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
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
    pairs = [abs(x - y) for i, x in enumerate(scores) for y in scores[i + 1:]]
    return fmean(pairs)


def icc1(groups: Sequence[Sequence[float]]) -> float | None:
    g = len(groups)
    total = sum(len(x) for x in groups)
    if g < 2 or total <= g:
        return None
    grand = sum(sum(x) for x in groups) / total
    means = [fmean(x) for x in groups]
    msb = sum(len(x) * (m - grand) ** 2 for x, m in zip(groups, means, strict=True)) / (g - 1)
    msw = sum((v - m) ** 2 for x, m in zip(groups, means, strict=True) for v in x) / (total - g)
    k0 = (total - sum(len(x) ** 2 for x in groups) / total) / (g - 1)
    denominator = msb + (k0 - 1) * msw
    return None if denominator == 0 else (msb - msw) / denominator


def reliability(groups: Sequence[Sequence[float]], threshold: float | None = None) -> Reliability | None:
    """The judge's self-agreement over runs it scored two or more times; None when there are none."""
    groups = [list(x) for x in groups if len(x) >= 2]
    if not groups:
        return None
    flips = None
    if threshold is not None:
        flips = fmean([len({v >= threshold for v in x}) > 1 for x in groups])
    return Reliability(len(groups), fmean([_pairwise(x) for x in groups]), icc1(groups), flips)
