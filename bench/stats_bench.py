"""Statistics bench: do the intervals cover the truth, does the gate stay quiet, does it find the MDE?

    python bench/stats_bench.py [--campaigns 200] [--cases 50] [--reps 2] [--judges 3] [--samples 2000]

Simulated campaigns with known truth: a model's true mean score, each case's effect (its difficulty,
the same on both sides of a comparison: the same suite), each run repetition's effect, and the judge's
noise on each judgement. A case's value is the mean over its runs of the mean of its judgements, as in
`claw report`. Three figures, each over `--campaigns` simulations:

1. coverage: the share of campaigns whose 95 % interval of the mean score (clawstore.stats.intervals:
   the clustered t-interval `claw report` prints) holds the true mean, and of pass-rate Wilson intervals
   holding the true pass rate (target 93-97 %);
2. false alarms: pairs of identical configs with a noisy judge, compared as `claw compare
   --fail-on-regression` does (clawstore.stats.paired: the interval of B - A below 0); target ≤ 5 %;
3. power: pairs where B is truly worse by the MDE the identical pairs printed (their median): the share
   detected (target ≥ 75 %, 80 % in theory).

Then the cost: a real Store with one build of `--report-runs` runs (bench/view_bench.py's campaign: two
judge repetitions each), `claw report`'s build_report timed with its statistics and with them stubbed
out (today's report), the least of 5 in CPU seconds (target: at most 1 s more at 10,000 runs).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from statistics import NormalDist, fmean, median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.stats.intervals import mean_interval, wilson  # noqa: E402
from clawstore.stats.paired import paired  # noqa: E402

TRUE_MEAN = 6.0
CASE_SD, RUN_SD, JUDGE_SD = 1.5, 0.5, 0.7
THRESHOLD = 6.5


def case_values(rng: random.Random, effects: list[float], mean: float, args: argparse.Namespace) -> list[float]:
    """Each case's value: the mean over its run repetitions of the mean of its judge repetitions."""
    out = []
    for effect in effects:
        runs = []
        for _ in range(args.reps):
            run = mean + effect + rng.gauss(0, RUN_SD)
            runs.append(fmean([run + rng.gauss(0, JUDGE_SD) for _ in range(args.judges)]))
        out.append(fmean(runs))
    return out


def true_pass_rate(args: argparse.Namespace) -> float:
    """P(case value >= threshold): the case value is normal with this variance."""
    var = CASE_SD ** 2 + RUN_SD ** 2 / args.reps + JUDGE_SD ** 2 / (args.reps * args.judges)
    return 1 - NormalDist(TRUE_MEAN, var ** 0.5).cdf(THRESHOLD)


def coverage(args: argparse.Namespace) -> tuple[float, float]:
    rng = random.Random(f"coverage/{args.seed}")
    truth = true_pass_rate(args)
    means = rates = 0
    for _ in range(args.campaigns):
        values = case_values(rng, [rng.gauss(0, CASE_SD) for _ in range(args.cases)], TRUE_MEAN, args)
        score = mean_interval(values, bounds=(-1e9, 1e9))
        rate = wilson(sum(v >= THRESHOLD for v in values), len(values))
        assert score is not None and score.low is not None and score.high is not None and rate is not None
        means += score.low <= TRUE_MEAN <= score.high
        rates += rate.low is not None and rate.high is not None and rate.low <= truth <= rate.high
    return means / args.campaigns, rates / args.campaigns


def comparisons(args: argparse.Namespace, drop: float, label: str) -> tuple[float, list[float]]:
    """Share of `--campaigns` pairs the gate fails (B's interval below 0), and the MDEs printed."""
    rng = random.Random(f"{label}/{args.seed}")
    fired, mdes = 0, []
    for i in range(args.campaigns):
        effects = [rng.gauss(0, CASE_SD) for _ in range(args.cases)]
        a = case_values(rng, effects, TRUE_MEAN, args)
        b = case_values(rng, effects, TRUE_MEAN - drop, args)
        result = paired(a, b, seed=i, samples=args.samples)
        assert result is not None
        fired += result.below(0.0)
        mdes.append(result.mde)
    return fired / args.campaigns, mdes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=200)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report-runs", type=int, default=10_000)
    parser.add_argument("--report-models", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{args.campaigns} simulated campaigns of {args.cases} cases, {args.reps} run x {args.judges} judge "
          f"repetitions; case sd {CASE_SD}, run sd {RUN_SD}, judge sd {JUDGE_SD}; {args.samples} bootstrap samples")
    score_cover, rate_cover = coverage(args)
    print(f"coverage of the true mean by the 95% score interval: {score_cover:.1%} (target 93-97%)")
    print(f"coverage of the true pass rate by the 95% Wilson interval: {rate_cover:.1%}")
    false_alarms, mdes = comparisons(args, 0.0, "identical")
    print(f"identical configs, noisy judge: --fail-on-regression fired in {false_alarms:.1%} (target <= 5%)")
    drop = median(mdes)
    detected, _ = comparisons(args, drop, "drop")
    print(f"true drop = the printed MDE (median {drop:.3f}): detected in {detected:.1%} (target >= 75%)")
    print(f"took {time.perf_counter() - started:.1f} s")
    report_cost(args.report_runs, args.report_models)


def report_cost(runs: int, models: int) -> None:
    import tempfile
    from unittest import mock

    from bench.view_bench import CAMPAIGN, write_campaign
    from clawstore.query.heads import stored_rows
    from clawstore.report import data
    from clawstore.report.stats import ModelStats, judge_reliability, thresholds
    from clawstore.store import Store

    with tempfile.TemporaryDirectory(prefix="claw-stats-bench-") as tmp:
        store = Store(Path(tmp) / "store")
        write_campaign(store, runs, models)

        def timed() -> float:
            """CPU seconds, the least of 5 (on a shared machine wall time counts the others' work, and
            their contention only ever adds)."""
            times = []
            for _ in range(5):
                began = time.process_time()
                data.build_report(store, CAMPAIGN["id"])
                times.append(time.process_time() - began)
            return min(times)

        with_stats = timed()
        with mock.patch.object(data._ModelFold, "stats", lambda _: ModelStats(None, None)), \
                mock.patch.object(data, "judge_reliability", lambda *_: []):
            without = timed()
        # the statistics alone, on the report's rows: the difference above, without build_report's own jitter
        report = data.build_report(store, CAMPAIGN["id"])
        head = data.load_head(store, CAMPAIGN["id"]).doc
        tables = stored_rows(store, head)  # type: ignore[arg-type]
        alone = []
        for _ in range(5):
            began = time.process_time()
            data.model_stats(report.rows, tables["results"])
            judge_reliability(tables["judgements"], thresholds(tables["results"]))
            alone.append(time.process_time() - began)
    print(f"build_report of {runs} runs ({models} models, 2 judge repetitions): {with_stats:.2f} CPU s with the "
          f"statistics, {without:.2f} CPU s without: {with_stats - without:+.3f} s; the statistics alone "
          f"{min(alone):.3f} CPU s (target <= 1 s)")


if __name__ == "__main__":
    main()
