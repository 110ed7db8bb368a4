"""Paired comparison of two sides over the cases both hold: the mean difference B - A, a seeded bootstrap interval, a
seeded sign-flip p-value and the minimum detectable effect at 80 % power. Methods: docs/compare.md (Details by module).
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev
from typing import Any

from clawstore.stats.intervals import t_quantile

# 32 random bits per draw: the typecode of an unsigned 32-bit array on this platform
_U32 = next(code for code in "IL" if array(code).itemsize == 4)
POWER = 0.80
# Beyond this many draws (cases × samples: 500 cases at 4,000 samples) the interval is the t-interval
# mean ± t(1 - α/2, n-1)·sd/√n: the expanded percentile interval's own large-sample limit (its bootstrap
# distribution is then normal with spread sd·√((n-1)/n)/√n, expanded by √(n/(n-1))·t/z), without its
# Monte Carlo error or its cost (about 0.1 s per million draws)
BOOTSTRAP_DRAWS = 2_000_000


@dataclass(frozen=True)
class Paired:
    n: int  # cases on both sides
    delta: float  # mean of B - A over them
    low: float | None  # None below two cases
    high: float | None
    p_value: float | None  # two-sided, of "no difference"
    mde: float | None  # the smallest true |delta| found with 80 % power at this n and spread
    sd: float  # standard deviation of the case differences

    def below(self, margin: float) -> bool:
        """The whole interval lies below -margin: a regression beyond the margin."""
        return self.high is not None and self.high < -margin

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 6)  # noqa: E731
        return {"n": self.n, "delta": r(self.delta), "low": r(self.low), "high": r(self.high),
                "p_value": r(self.p_value), "mde": r(self.mde), "sd": r(self.sd)}


def bootstrap_means(values: Sequence[float], rng: random.Random, samples: int) -> list[float]:
    """`samples` means of `len(values)` values drawn with replacement (each index 32 random bits modulo
    n: the first favoured by at most n / 2**32)."""
    n = len(values)
    out = []
    for _ in range(samples):
        out.append(sum([values[bits % n] for bits in array(_U32, rng.randbytes(4 * n))]) / n)
    return out


def percentile_interval(samples: list[float], confidence: float) -> tuple[float, float]:
    ordered = sorted(samples)
    tail = (1.0 - confidence) / 2
    low_at = max(0, math.floor(tail * len(ordered)))
    high_at = min(len(ordered) - 1, math.ceil((1.0 - tail) * len(ordered)) - 1)
    return ordered[low_at], ordered[high_at]


def sign_flip_p(diffs: Sequence[float], rng: random.Random, samples: int) -> float:
    """Two-sided sign-flip permutation p-value of the mean difference, (k + 1) / (samples + 1), drawing 8 cases per step
    from a table of subset sums. Details: docs/compare.md (Details by module)."""
    total = sum(diffs)
    tables = []
    for start in range(0, len(diffs), 8):
        chunk = list(diffs[start:start + 8]) + [0.0] * (8 - len(diffs[start:start + 8]))
        tables.append([sum(chunk[i] for i in range(8) if byte >> i & 1) for byte in range(256)])
    observed = abs(total) - 1e-9 * (1 + abs(total))  # (ties count as extreme, whatever the rounding)
    hits = 0
    for _ in range(samples):
        flipped = sum(map(list.__getitem__, tables, rng.randbytes(len(tables))))
        hits += abs(total - 2 * flipped) >= observed
    return (hits + 1) / (samples + 1)


def expanded(confidence: float, n: int) -> float:
    """The confidence whose percentiles make the expanded percentile interval (n >= 2)."""
    t = t_quantile(1 - (1 - confidence) / 2, n - 1)
    return 1 - 2 * NormalDist().cdf(-math.sqrt(n / (n - 1)) * t)


def mde(sd: float, n: int, confidence: float = 0.95, power: float = POWER) -> float:
    """(t(1 - α/2, n-1) + t(power, n-1)) · sd / √n: the true mean difference a two-sided test at level
    α = 1 - confidence finds with probability `power` (t, not z: with 10 cases z's MDE was found 2
    times in 3, not 4 in 5)."""
    return (t_quantile(1 - (1 - confidence) / 2, n - 1) + t_quantile(power, n - 1)) * sd / math.sqrt(n)


def paired(a: Sequence[float], b: Sequence[float], seed: int | str = 0, samples: int = 4000,
           confidence: float = 0.95) -> Paired | None:
    """The paired comparison of case values a[i] and b[i] (same case); None without a case."""
    # (rounded: two means of the same judge scores, summed in another order, differ by 1e-16, not by a change)
    diffs = [round(y - x, 12) for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    if n == 0:
        return None
    delta = round(fmean(diffs), 9)  # (the rounded differences' mean: no 1e-13 that reads as a change)
    sd = stdev(diffs) if n > 1 else 0.0
    if n < 2:  # one case: no spread, so no interval (unknown is not zero)
        return Paired(n, delta, None, None, None, None, sd)
    rng = random.Random(f"paired/{seed}")
    if sd == 0.0:  # every case moved by the same amount: every resample's mean is that amount
        low = high = delta
    elif n * samples > BOOTSTRAP_DRAWS:
        half = t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
        low, high = delta - half, delta + half
    else:
        low, high = percentile_interval(bootstrap_means(diffs, rng, samples), expanded(confidence, n))
    return Paired(n, delta, low, high, sign_flip_p(diffs, rng, samples), mde(sd, n, confidence), sd)
