"""Compare benchmark: `claw compare`'s bootstrap against the textbook one, on the same simulated campaigns.

    python bench/compare_bench.py [--cases 400] [--models 5] [--reps 1] [--judges 2] [--samples 4000]

Two campaigns of `--models` models × `--cases` cases, each case run `--reps` times and judged `--judges`
times per run, the judge's scores wobbling by ±0.5, the second campaign 1 point worse on a tenth of
the cases. `compare_sides` (each pool's residuals drawn for all samples at once, summed element-wise)
is timed against the textbook bootstrap (tests/support/bootstrap.py: each sample redraws every residual
one at a time, as the compare of before did) on the same data, in the same run: the ratio is the
figure. How far apart their case intervals are, and how many verdicts differ, shows they agree up to
the Monte Carlo error: about 0.02 between seeds at 20,000 samples for 4 cases; with Bonferroni over
thousands of cases an interval's ends are the extremes of its samples, which move by tenths between
seeds, whichever bootstrap draws them. The textbook one computes the case intervals only (not the
models'): the baseline is, if anything, cheaper than the code it stands for.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.compare.delta import compare_sides, noise_of  # noqa: E402
from clawstore.compare.scores import SideScores  # noqa: E402
from tests.support.bootstrap import textbook_interval  # noqa: E402

Scores = dict[str, dict[str, dict[int, list[float]]]]


def campaign(rng: random.Random, args: argparse.Namespace, worse: bool) -> Scores:
    steps = [-0.5, -0.25, 0.0, 0.25, 0.5]
    return {f"m{m}": {f"c{c}": {rep: [7.0 - (1.0 if worse and c % 10 == 0 else 0.0) + rng.choice(steps)
                                      for _ in range(args.judges)] for rep in range(args.reps)}
                      for c in range(args.cases)} for m in range(args.models)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--reps", type=int, default=1, help="run repetitions per case")
    parser.add_argument("--judges", type=int, default=2, help="judge repetitions per run")
    parser.add_argument("--samples", type=int, default=4000)
    args = parser.parse_args()
    rng = random.Random(1)
    a, b = campaign(rng, args, False), campaign(rng, args, True)
    started = time.perf_counter()
    result = compare_sides(SideScores("a", "blake3:a", "a", a), SideScores("b", "blake3:b", "b", b),
                           samples=args.samples)
    claw = time.perf_counter() - started
    confidence = 1 - 0.05 / (args.cases * args.models)  # the case intervals' Bonferroni level
    started = time.perf_counter()
    reference = {}
    textbook_rng = random.Random(2)
    for model in a:
        noise_a, noise_b = noise_of(a[model]), noise_of(b[model])
        for case in a[model]:
            reference[model, case] = textbook_interval(a[model][case], b[model][case], noise_a, noise_b,
                                                       textbook_rng, args.samples, confidence)
    textbook = time.perf_counter() - started
    apart = sorted(max(abs(d.low - reference[d.model_id, d.case_id][0]),
                       abs(d.high - reference[d.model_id, d.case_id][1])) for d in result.cases)
    verdicts = sum((d.verdict == "within noise") != (reference[d.model_id, d.case_id][0] <= 0.0
                                                     <= reference[d.model_id, d.case_id][1]) for d in result.cases)
    flagged = sum(d.verdict != "within noise" for d in result.cases)
    print(f"{args.models} models x {args.cases} cases, {args.reps} run x {args.judges} judge repetitions, "
          f"{args.samples} samples; {flagged} of {len(result.cases)} case deltas flagged")
    print(f"compare: claw {claw:.2f} s vs textbook bootstrap {textbook:.2f} s: {claw / textbook:.2f}x the time; "
          f"case intervals apart by {apart[len(apart) // 2]:.3f} (median), {apart[-1]:.3f} (most); "
          f"{verdicts} verdicts differ")


if __name__ == "__main__":
    main()
