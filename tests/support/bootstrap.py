"""The bootstrap of docs/compare.md written the plain way, one sample and one residual at a time: the
reference `clawstore.compare` must agree with (tests/compare) and the baseline of bench/compare_bench.py."""

from __future__ import annotations

import math
import random

from clawstore.compare.delta import Noise, case_score


def textbook_interval(a: dict[int, list[float]], b: dict[int, list[float]], noise_a: Noise, noise_b: Noise,
                      rng: random.Random, samples: int, confidence: float) -> tuple[float, float]:
    """One case's interval of B - A: each sample redraws every run's and every judgement's residual."""
    def draw(reps: dict[int, list[float]], noise: Noise) -> float:
        shifts = [(rng.choice(noise.run) if noise.run else 0.0)
                  + (sum(rng.choice(noise.judge) for _ in scores) / len(scores) if noise.judge else 0.0)
                  for scores in reps.values()]
        return case_score(reps) + sum(shifts) / len(shifts)

    deltas = sorted(draw(b, noise_b) - draw(a, noise_a) for _ in range(samples))
    tail = (1 - confidence) / 2
    return deltas[max(0, math.floor(tail * samples))], deltas[min(samples, math.ceil((1 - tail) * samples)) - 1]
