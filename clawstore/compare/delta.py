"""Score deltas between two campaign states, with intervals that include judge and run noise (estimated from the
repetitions, pooled over a model's cases). The model: docs/compare.md (Details by module)."""

from __future__ import annotations

import math
import operator
import random
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawstore.compare.paired import Flip, JudgeNoise, ModelPaired, flips, judge_noise, paired_models
from clawstore.compare.scores import SideScores

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader

DEFAULT_CONFIDENCE = 0.95
DEFAULT_SAMPLES = 4000
MAX_SAMPLES = 1_000_000  # as `claw compare --samples` allows (cli/compare_cmd.py: kept apart, for its start-up)


@dataclass
class Noise:
    """Pooled residuals of one model on one side."""

    judge: list[float] = field(default_factory=list)
    run: list[float] = field(default_factory=list)


@dataclass
class Delta:
    model_id: str
    case_id: str | None  # None: the model over all its common cases
    a: float
    b: float
    low: float
    high: float
    n_a: int  # judgements behind the A score
    n_b: int

    @property
    def delta(self) -> float:
        return self.b - self.a

    @property
    def verdict(self) -> str:
        if self.low <= 0.0 <= self.high:
            return "within noise"
        return "improved" if self.low > 0 else "regressed"

    def to_json(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "case_id": self.case_id, "a": round(self.a, 6), "b": round(self.b, 6),
                "delta": round(self.delta, 6), "low": round(self.low, 6), "high": round(self.high, 6),
                "verdict": self.verdict, "judgements_a": self.n_a, "judgements_b": self.n_b}


@dataclass
class Comparison:
    a: SideScores
    b: SideScores
    confidence: float
    samples: int
    models: list[Delta]
    cases: list[Delta]
    unmatched: list[str]  # "model/case scored only in A" lines (absent from B, or without a successful judgement there)
    unmeasured: list[str] = field(default_factory=list)  # models with one run and one judgement per case
    paired: list[ModelPaired] = field(default_factory=list)  # the gate's comparison (compare/paired.py)
    flips: list[Flip] = field(default_factory=list)
    judge_noise: list[JudgeNoise] = field(default_factory=list)
    margin: float = 0.0

    @property
    def regressions(self) -> list[Delta]:
        return [d for d in self.models if d.verdict == "regressed"]

    @property
    def gate_failures(self) -> list[ModelPaired]:
        """What `--fail-on-regression` fails on: a paired interval wholly below -margin."""
        return [p for p in self.paired if p.result.below(self.margin)]

    def to_json(self) -> dict[str, Any]:
        side = lambda s: {"ref": s.label, "head": s.head_id, "campaign": s.campaign_id,  # noqa: E731
                          "trusted": s.signer is None, "signer": s.signer}
        return {"a": side(self.a), "b": side(self.b), "confidence": self.confidence, "samples": self.samples,
                "models": [d.to_json() for d in self.models], "cases": [d.to_json() for d in self.cases],
                "unmatched": self.unmatched, "regressed_models": [d.model_id for d in self.regressions],
                "noise_unmeasured": self.unmeasured, "margin": self.margin,
                "paired": [p.to_json(self.margin) for p in self.paired],
                "gate_failed": [p.model_id for p in self.gate_failures],
                "flipped": [f.to_json() for f in self.flips], "judge_noise": [j.to_json() for j in self.judge_noise]}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _centred(values: list[float]) -> list[float]:
    """Residuals around the mean, widened by sqrt(n/(n-1)) so a small group does not understate spread."""
    if len(values) < 2:
        return []
    centre, scale = _mean(values), math.sqrt(len(values) / (len(values) - 1))
    return [(v - centre) * scale for v in values]


def case_score(reps: dict[int, list[float]]) -> float:
    return _mean([_mean(scores) for scores in reps.values()])


def _variance(values: list[float]) -> float:
    return sum(v * v for v in values) / len(values) if values else 0.0


def noise_of(cases: dict[str, dict[int, list[float]]]) -> Noise:
    """Pooled residuals. A repetition's mean already carries its judges' noise, so run residuals are
    shrunk to the part of their spread the judges do not explain (var_run - var_judge / judges per run)."""
    noise = Noise()
    per_run = []
    for reps in cases.values():
        for scores in reps.values():
            noise.judge += _centred(scores)
            per_run.append(len(scores))
        noise.run += _centred([_mean(scores) for scores in reps.values()])
    between = _variance(noise.run)
    if between > 0:
        explained = _variance(noise.judge) / _mean([float(n) for n in per_run])
        shrink = math.sqrt(max(0.0, between - explained) / between)
        noise.run = [r * shrink for r in noise.run]
    return noise


# 32 random bits per draw: the typecode of an unsigned 32-bit array on this platform
_U32 = next(code for code in "IL" if array(code).itemsize == 4)


def _draws(rng: random.Random, pool: list[float], count: int) -> list[float]:
    """`count` values drawn with replacement from `pool`, each picked by 32 random bits modulo its size
    (the first values favoured by at most size / 2**32: one in a million at 4,000 values, far below the
    bootstrap's own error)."""
    size = len(pool)
    return [pool[bits % size] for bits in array(_U32, rng.randbytes(4 * count))]


def _add(total: list[float] | None, more: list[float]) -> list[float]:
    return more if total is None else list(map(operator.add, total, more))


def _divided(values: list[float], by: int) -> list[float]:
    return values if by == 1 else [value / by for value in values]


def _case_noise(rng: random.Random, reps: dict[int, list[float]], noise: Noise, samples: int) -> list[float] | None:
    """`samples` bootstrap replicates of a case's noise: per run repetition a run residual plus the mean
    of a judge residual per judgement, averaged over the repetitions. None when both pools are empty
    (a single run and judge repetition everywhere): the case has no noise to draw."""
    if not (noise.run or noise.judge):
        return None
    total: list[float] | None = None
    for scores in reps.values():
        if noise.run:
            total = _add(total, _draws(rng, noise.run, samples))
        if noise.judge and scores:
            judged: list[float] | None = None
            for _ in scores:
                judged = _add(judged, _draws(rng, noise.judge, samples))
            total = _add(total, _divided(judged or [], len(scores)))
    return _divided(total or [0.0] * samples, len(reps))


def _interval(samples: list[float], confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2
    low_at = max(0, math.floor(tail * len(samples)))
    high_at = min(len(samples) - 1, math.ceil((1.0 - tail) * len(samples)) - 1)
    if low_at == 0 and high_at == len(samples) - 1:  # (Bonferroni over many cases: the extremes)
        return min(samples), max(samples)
    ordered = sorted(samples)
    return ordered[low_at], ordered[high_at]


def _resolving(confidence: float) -> int:
    """Samples that put about one beyond each end of an interval at this confidence (at most
    MAX_SAMPLES): with Bonferroni over thousands of cases, 4,000 samples cannot reach a case's tail."""
    return min(MAX_SAMPLES, math.ceil(2.0 / (1.0 - confidence)))


def _largest(noise: Noise) -> tuple[float, float]:
    """The largest run and judge residuals of a model's pools (once per model and side)."""
    return max(map(abs, noise.run), default=0.0), max(map(abs, noise.judge), default=0.0)


def _noise_reach(reps: dict[int, list[float]], largest: tuple[float, float]) -> float:
    """The largest noise a bootstrap sample of this case can draw on one side."""
    run, judge = largest
    return sum(run + (judge if scores else 0.0) for scores in reps.values()) / len(reps)


def _delta_noise(rng: random.Random, a: dict[int, list[float]], b: dict[int, list[float]], noise_a: Noise,
                 noise_b: Noise, samples: int) -> list[float] | None:
    """`samples` bootstrap replicates of the noise of one case's delta B - A (the delta of its scores
    added, they are its replicates); None when neither side has noise to draw."""
    drawn_b, drawn_a = _case_noise(rng, b, noise_b, samples), _case_noise(rng, a, noise_a, samples)
    if drawn_a is None:
        return drawn_b
    if drawn_b is None:
        return [-value for value in drawn_a]
    return list(map(operator.sub, drawn_b, drawn_a))


def compare_sides(a: SideScores, b: SideScores, confidence: float = DEFAULT_CONFIDENCE,
                  samples: int = DEFAULT_SAMPLES, seed: int = 0, margin: float = 0.0) -> Comparison:
    rng = random.Random(seed)
    models: list[Delta] = []
    cases: list[Delta] = []
    unmatched: list[str] = []
    unmeasured: list[str] = []
    common_models = [m for m in a.scores if m in b.scores]
    for model in sorted(set(a.scores) ^ set(b.scores)):
        unmatched.append(f"model {model} scored only in {'A' if model in a.scores else 'B'}")
    model_confidence = 1.0 - (1.0 - confidence) / max(1, len(common_models))
    n_cases = sum(1 for m in common_models for c in a.scores[m] if c in b.scores[m])
    case_confidence = 1.0 - (1.0 - confidence) / max(1, n_cases)
    for model in common_models:
        ca, cb = a.scores[model], b.scores[model]
        common = [c for c in ca if c in cb]
        for case in sorted(set(ca) ^ set(cb)):
            unmatched.append(f"{model}/{case} scored only in {'A' if case in ca else 'B'}")
        if not common:
            continue
        noise_a, noise_b = noise_of(ca), noise_of(cb)
        largest_a, largest_b = _largest(noise_a), _largest(noise_b)
        # Each sample's deltas summed over the cases, for the model's: the scores' deltas apart (a case
        # without noise adds the same to every sample), then the noise of the cases that have some.
        scores_delta: float = 0.0
        noise_summed: list[float] | None = None
        for case in common:
            score_a, score_b = case_score(ca[case]), case_score(cb[case])
            noise = _delta_noise(rng, ca[case], cb[case], noise_a, noise_b, samples)
            delta = score_b - score_a
            if noise is None:
                low = high = delta
            else:  # (adding the delta keeps the order: the replicates' extremes are the noise's, shifted)
                low, high = _interval(noise, case_confidence)
                if (not low <= -delta <= high and samples < _resolving(case_confidence)
                        and abs(delta) <= _noise_reach(ca[case], largest_a) + _noise_reach(cb[case], largest_b)):
                    # Flagged on samples too few to reach its tail, by a delta its noise could reach:
                    # drawn again, enough to reach it (the far ends of a few thousand samples miss
                    # values the noise takes about once in a thousand: identical configs were flagged
                    # 8 % of the time at 2,000 cases, not 5 %).
                    more = _delta_noise(random.Random(f"{seed}/{model}/{case}"), ca[case], cb[case], noise_a,
                                        noise_b, _resolving(case_confidence))
                    low, high = _interval(more or [0.0], case_confidence)
                low, high = delta + low, delta + high
                noise_summed = _add(noise_summed, noise)
            scores_delta += delta
            cases.append(Delta(model, case, score_a, score_b, low, high,
                               sum(map(len, ca[case].values())), sum(map(len, cb[case].values()))))
        if noise_summed is None:
            low = high = scores_delta / len(common)
            unmeasured.append(model)
        else:
            low, high = _interval([(scores_delta + total) / len(common) for total in noise_summed], model_confidence)
        models.append(Delta(model, None, _mean([case_score(ca[c]) for c in common]),
                            _mean([case_score(cb[c]) for c in common]), low, high,
                            sum(sum(map(len, ca[c].values())) for c in common),
                            sum(sum(map(len, cb[c].values())) for c in common)))
    return Comparison(a, b, confidence, samples, models, cases, unmatched, unmeasured,
                      paired_models(a, b, confidence, samples, seed), flips(a, b),
                      judge_noise(a, "A") + judge_noise(b, "B"), margin)


def compare(store: StoreReader, a: str, b: str, confidence: float = DEFAULT_CONFIDENCE, samples: int = DEFAULT_SAMPLES,
            seed: int = 0, margin: float = 0.0) -> Comparison:
    """The comparison data of two campaign states (what `claw compare` prints and a viewer renders)."""
    from clawstore.compare.scores import read_side

    return compare_sides(read_side(store, a), read_side(store, b), confidence, samples, seed, margin)
