"""clawstore.stats against values computed by hand or by exhaustive enumeration."""

from __future__ import annotations

import itertools
import math
import random
from statistics import fmean, stdev

import pytest

from clawstore.stats.intervals import mean_interval, t975, wilson
from clawstore.stats.paired import mde, paired, sign_flip_p
from clawstore.stats.reliability import icc1, reliability
from clawstore.stats.repetitions import pass_k


@pytest.mark.parametrize(("df", "exact"), [(1, 12.7062), (5, 2.5706), (10, 2.2281), (20, 2.0860), (30, 2.0423),
                                           (120, 1.9799)])
def test_t_quantile_is_within_a_thousandth(df: int, exact: float) -> None:
    assert t975(df) == pytest.approx(exact, abs=1e-3)


def test_mean_interval_is_the_clustered_t_interval() -> None:
    values = [6.0, 7.0, 8.0, 7.5]
    interval = mean_interval(values)
    assert interval is not None
    half = 3.1824 * 0.853912563 / 2  # t(0.975, 3) * s / sqrt(4)
    assert (interval.low, interval.high, interval.n) == (pytest.approx(7.125 - half, abs=1e-4),
                                                         pytest.approx(7.125 + half, abs=1e-4), 4)
    one = mean_interval([7.0])
    assert one is not None and (one.low, one.high, one.text()) == (None, None, "7.00 [n/a]")
    assert mean_interval([]) is None
    clipped = mean_interval([10.0, 10.0, 9.0])
    assert clipped is not None and clipped.high == 10.0


def test_wilson_matches_the_textbook_values() -> None:
    none_of_ten = wilson(0, 10)
    assert none_of_ten is not None and none_of_ten.low == 0.0
    assert none_of_ten.high == pytest.approx(0.2775, abs=1e-4)
    half = wilson(5, 10)
    assert half is not None
    assert (half.low, half.high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert wilson(0, 0) is None


def test_the_sign_flip_p_value_approaches_the_exact_one() -> None:
    diffs = [0.5, 1.0, -0.25, 0.75, 1.5, 0.25, -0.5, 1.25, 0.5, 0.75]
    total = abs(sum(diffs))
    flips = list(itertools.product((1, -1), repeat=len(diffs)))
    exact = sum(abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= total - 1e-9
                for signs in flips) / len(flips)

    assert sign_flip_p(diffs, random.Random(1), 20_000) == pytest.approx(exact, abs=0.01)


def test_paired_is_seeded_and_unknown_below_two_cases() -> None:
    a = [6.0, 7.0, 5.5, 8.0, 6.5, 7.0]
    b = [5.0, 6.5, 5.5, 7.0, 6.0, 6.0]
    first, again = paired(a, b, seed=3, samples=500), paired(a, b, seed=3, samples=500)
    assert first == again and first is not None
    assert first.delta == pytest.approx(fmean(b) - fmean(a))
    assert first.low is not None and first.high is not None and first.low <= first.delta <= first.high
    assert first.mde == pytest.approx(mde(first.sd, 6))
    assert first.mde == pytest.approx((2.570582 + 0.919544) * first.sd / math.sqrt(6), abs=1e-5)  # t(.975, 5), t(.8, 5)
    one = paired([6.0], [5.0])
    assert one is not None and (one.low, one.high, one.p_value, one.below(0.0)) == (None, None, None, False)


def test_icc_and_mean_absolute_difference() -> None:
    perfect = reliability([[3.0, 3.0], [7.0, 7.0], [5.0, 5.0]], threshold=6.0)
    assert perfect is not None and (perfect.mad, perfect.icc, perfect.flip_share) == (0.0, 1.0, 0.0)
    noisy = reliability([[5.0, 7.0], [6.0, 6.5], [4.0, 4.0, 5.0], [8.0]], threshold=6.0)
    assert noisy is not None and noisy.runs == 3  # the run judged once is not a repetition
    assert noisy.mad == pytest.approx(fmean([2.0, 0.5, fmean([0.0, 1.0, 1.0])]))
    assert noisy.flip_share == pytest.approx(1 / 3)  # 5 and 7 straddle 6; 6 and 6.5 both pass
    # one-way ICC(1) by hand: MSB = 5.5672 / 2, MSW = 2.7917 / 4, k0 = (7 - 17/7) / 2 = 2.2857
    assert icc1([[5.0, 7.0], [6.0, 6.5], [4.0, 4.0, 5.0]]) == pytest.approx(0.5665, abs=1e-3)
    assert reliability([[5.0]]) is None


def test_pass_at_k_and_pass_all_k() -> None:
    result = pass_k({"c1": [True, False], "c2": [True, True], "c3": [False, False], "c4": [True]})
    assert result is not None and (result.k, result.left_out) == (2, 1)
    assert (result.at_k.mean, result.all_k.mean, result.at_k.n) == (2 / 3, 1 / 3, 3)
    assert pass_k({"c1": [True], "c2": [False]}) is None


def test_many_cases_take_the_bootstraps_large_sample_limit() -> None:
    rng = random.Random(1)
    a = [rng.gauss(6, 1.5) for _ in range(600)]
    b = [x + rng.expovariate(1) - 1.2 for x in a]  # skewed differences
    diffs = [round(y - x, 12) for x, y in zip(a, b, strict=True)]
    half = t975(599) * stdev(diffs) / math.sqrt(600)
    big = paired(a, b, samples=4000)  # 2.4 million draws: the t-interval
    assert big is not None and (big.low, big.high) == (pytest.approx(fmean(diffs) - half, abs=1e-3),
                                                       pytest.approx(fmean(diffs) + half, abs=1e-3))
    drawn = paired(a[:300], b[:300], samples=4000)  # 1.2 million: the bootstrap, within its Monte Carlo error
    half = t975(299) * stdev(diffs[:300]) / math.sqrt(300)
    assert drawn is not None and drawn.low == pytest.approx(fmean(diffs[:300]) - half, abs=0.01)
    assert drawn.high == pytest.approx(fmean(diffs[:300]) + half, abs=0.01)
    same = paired([1.0, 2.0, 3.0], [1.5, 2.5, 3.5])
    assert same is not None and (same.low, same.high, same.sd) == (0.5, 0.5, 0.0)  # all moved alike
