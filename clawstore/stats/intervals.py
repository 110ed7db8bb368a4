"""95 % intervals on a mean over cases (clustered by case) and on a pass rate (Wilson); a case is the unit that varies
independently. The formulas: docs/compare.md (Details by module)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev
from typing import Any

Z975 = NormalDist().inv_cdf(0.975)  # 1.959964
# t(0.975, df) for df 1..9, where the expansion below is too short; SQL uses the same numbers
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 6: 2.4469, 7: 2.3646, 8: 2.3060, 9: 2.2622}


def t975(df: int) -> float:
    """t(0.975, df): tabled below 10 degrees of freedom, else the Cornish-Fisher expansion in 1/df
    (within 0.0002 of the exact value from df = 10 on)."""
    if df in T975:
        return T975[df]
    z = Z975
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def t_cdf_two_sided(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with an integer df, in closed form (Abramowitz & Stegun 26.7.3-4):
    θ = atan(t/√df); even df: sin θ·Σ_{j<df/2} c_j cos^{2j} θ;
    odd df: (2/π)(θ + sin θ cos θ·Σ_{j<(df-1)/2} d_j cos^{2j} θ),
    with c_0 = d_0 = 1, c_j = c_{j-1}(2j-1)/(2j), d_j = d_{j-1}(2j)/(2j+1)."""
    theta = math.atan(abs(t) / math.sqrt(df))
    cos2, term, total = math.cos(theta) ** 2, 1.0, 0.0
    if df % 2 == 0:
        for j in range(df // 2):
            total += term
            term *= cos2 * (2 * j + 1) / (2 * j + 2)
        return math.sin(theta) * total
    for j in range((df - 1) // 2):
        total += term
        term *= cos2 * (2 * j + 2) / (2 * j + 3)
    return 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))


def t_quantile(p: float, df: int) -> float:
    """The p quantile (p > 0.5) of Student's t: the closed-form cdf inverted by bisection."""
    low, high = 0.0, 1.0
    while t_cdf_two_sided(high, df) < 2 * p - 1:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf_two_sided(mid, df) < 2 * p - 1 else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class Interval:
    """A mean and its 95 % interval over n cases; low and high are None below two cases (unknown)."""

    mean: float
    low: float | None
    high: float | None
    n: int

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 6)  # noqa: E731
        return {"mean": r(self.mean), "low": r(self.low), "high": r(self.high), "n": self.n}

    def text(self, fmt: str = ".2f") -> str:
        """`7.10 [6.80, 7.40]`, or `7.10 [n/a]` without an interval."""
        if self.low is None or self.high is None:
            return f"{self.mean:{fmt}} [n/a]"
        return f"{self.mean:{fmt}} [{self.low:{fmt}}, {self.high:{fmt}}]"


def mean_interval(values: Sequence[float], bounds: tuple[float, float] = (0.0, 10.0)) -> Interval | None:
    """The clustered t-interval of the mean of case values, clipped to `bounds` (the score's range)."""
    n = len(values)
    if n == 0:
        return None
    mean = fmean(values)
    if n < 2:
        return Interval(mean, None, None, 1)
    half = t975(n - 1) * stdev(values) / math.sqrt(n)
    return Interval(mean, max(bounds[0], mean - half), min(bounds[1], mean + half), n)


def wilson(successes: int, n: int) -> Interval | None:
    """The Wilson score interval of a proportion (right at 0 % and 100 %, where p ± z·√(p(1-p)/n) is not):
    (p + z²/2n ± z·√(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    if n == 0:
        return None
    p, z2 = successes / n, Z975 * Z975
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z975 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # (exactly 0 and 1 at the ends, where the formula's rounding leaves 1e-17)
    return Interval(p, 0.0 if successes == 0 else max(0.0, centre - half),
                    1.0 if successes == n else min(1.0, centre + half), n)
