"""Combine judge iterations into one final result (semantics documented in docs/evaluation.md).

Pooled: `sample_size` picks, per judge run, its first N successful repetitions by index; the
aggregation method is then applied once across every picked iteration of every judge run.
Deterministic checks never enter here: they inform the judge, not the arithmetic.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clawstore.evaluate.evidence import DIMENSIONS
from clawstore.evaluate.judge import JUDGE_STATUSES, JudgeIteration
from clawstore.evaluate.judge_contract import JudgeScores
from clawstore.values.canonical import field_values

METHODS = ("median", "mean", "majority_vote", "all_pass")
RESULT_FORMAT_VERSION = 1
DEFAULT_RUN = "judge"


@dataclass
class FinalResult:
    status: str  # success | failed
    method: str
    pass_threshold: float | None
    threshold_score: float | None
    final_score: float | None
    final_dimensions: dict[str, float | None]
    passed: bool | None
    failed_dimensions: list[str]
    counts: dict[str, int]
    warnings: list[str]
    used_iterations: list[dict[str, Any]]
    per_judge_run: dict[str, dict[str, Any]]
    summary: str | None
    overall_evidence: list[str]
    dimension_evidence: dict[str, list[str]]
    format_version: int = RESULT_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return field_values(self)


@dataclass
class _Combined:
    score: float
    dimensions: dict[str, float]
    passed: bool | None
    notes: list[str] = field(default_factory=list)


def threshold_score(pass_threshold: float | None) -> float | None:
    """pass_threshold is a fraction of the 0–10 scale; rounded so 0.7 means exactly 7.0."""
    if pass_threshold is None:
        return None
    if isinstance(pass_threshold, bool) or not 0.0 <= float(pass_threshold) <= 1.0:
        raise ValueError(f"pass_threshold must be within [0, 1] or null, got {pass_threshold!r}")
    return round(10.0 * float(pass_threshold), 9)


def _round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def _per_dimension(scores: Sequence[JudgeScores], reduce: Callable[[list[float]], float]) -> dict[str, float]:
    return {d: reduce([s.dimensions[d] for s in scores]) for d in DIMENSIONS}


def _simple(scores: Sequence[JudgeScores], reduce: Callable[[list[float]], float], t: float | None) -> _Combined:
    score = reduce([s.overall_score for s in scores])
    return _Combined(score, _per_dimension(scores, reduce), None if t is None else score >= t)


def _majority(scores: Sequence[JudgeScores], t: float | None) -> _Combined:
    notes: list[str] = []
    if t is not None:
        ayes = [s for s in scores if s.overall_score >= t]
        noes = [s for s in scores if s.overall_score < t]
        passed = len(ayes) > len(noes)
        if len(ayes) == len(noes):
            notes.append(f"majority_vote tie ({len(ayes)} pass, {len(noes)} fail): verdict is fail")
        winners = ayes if passed else noes
    else:
        buckets: dict[int, list[JudgeScores]] = {}
        for s in scores:
            buckets.setdefault(_round_half_up(s.overall_score), []).append(s)
        best = max(len(v) for v in buckets.values())
        tied = sorted(k for k, v in buckets.items() if len(v) == best)
        if len(tied) > 1:
            notes.append(f"majority_vote tie between rounded scores {tied}: the lowest wins")
        winners, passed = buckets[tied[0]], None
    result = _simple(winners, statistics.median, None)
    result.passed, result.notes = passed, notes
    return result


def _combine(scores: Sequence[JudgeScores], method: str, t: float | None) -> _Combined:
    if method == "median":
        return _simple(scores, statistics.median, t)
    if method == "mean":
        return _simple(scores, statistics.fmean, t)
    if method == "majority_vote":
        return _majority(scores, t)
    if method == "all_pass":
        return _simple(scores, min, t)  # min ≥ threshold ⇔ every iteration passes
    raise ValueError(f"unknown aggregation method {method!r} (known: {', '.join(METHODS)})")


def _as_iteration(item: object) -> JudgeIteration:
    if isinstance(item, JudgeIteration):
        return item
    if isinstance(item, Mapping):
        return JudgeIteration.from_dict(item)
    raise TypeError(f"expected a JudgeIteration or its dict, got {type(item).__name__}")


def _sample_size_for(sample_size: int | Mapping[str, int | None] | None, run_id: str) -> int | None:
    if isinstance(sample_size, Mapping):
        return sample_size.get(run_id)
    return sample_size


def _dedup(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def aggregate(
    iterations: Sequence[Any],
    method: str = "median",
    pass_threshold: float | None = None,
    sample_size: int | Mapping[str, int | None] | None = None,
) -> FinalResult:
    """The final result of one run from its judge iterations (JudgeIteration objects or dicts).

    `sample_size`: one value for every judge run, or `{judge_run_id: sample_size}`.
    """
    if method not in METHODS:
        raise ValueError(f"unknown aggregation method {method!r} (known: {', '.join(METHODS)})")
    t = threshold_score(pass_threshold)
    runs: dict[str, list[JudgeIteration]] = {}
    for item in iterations:
        it = _as_iteration(item)
        runs.setdefault(it.judge_run_id or DEFAULT_RUN, []).append(it)
    counts = {"iterations": 0, "successful": 0, "used": 0, "excluded_by_sample_size": 0}
    counts.update({s: 0 for s in JUDGE_STATUSES if s != "success"})
    warnings: list[str] = []
    used: list[tuple[str, JudgeIteration]] = []
    per_run: dict[str, dict[str, Any]] = {}
    part: _Combined | None = None
    for run_id, its in runs.items():
        its = sorted(its, key=lambda i: i.repetition)
        for it in its:
            counts["iterations"] += 1
            if it.status != "success":
                counts[it.status] = counts.get(it.status, 0) + 1
        ok = [i for i in its if i.status == "success" and i.scores is not None]
        counts["successful"] += len(ok)
        n = _sample_size_for(sample_size, run_id)
        picked = ok if n is None else ok[:n]
        if n is not None and len(ok) < n:
            warnings.append(f"judge run '{run_id}': sample_size {n} but only {len(ok)} successful repetition(s)")
        if n is not None and len(ok) > n:
            counts["excluded_by_sample_size"] += len(ok) - n
        # (`#0`, and their count first: "repetitions without a valid judgement: 0 (provider_error)" read as none)
        failed_reps = [f"#{i.repetition} ({i.status})" for i in its if i.status != "success"]
        if failed_reps:
            warnings.append(f"judge run '{run_id}': {len(failed_reps)} repetition(s) without a valid judgement: "
                            f"{', '.join(failed_reps)}")
        used.extend((run_id, i) for i in picked)
        entry: dict[str, Any] = {"used_repetitions": [i.repetition for i in picked], "score": None,
                                 "dimensions": None, "passed": None}
        part = None
        if picked:
            part = _combine([i.scores for i in picked if i.scores], method, t)
            entry.update(score=part.score, dimensions=part.dimensions, passed=part.passed)
        per_run[run_id] = entry
    counts["used"] = len(used)
    pool = [it.scores for _, it in used if it.scores is not None]
    used_refs = [{"judge_run_id": run_id, "repetition": it.repetition} for run_id, it in used]
    empty_dims: dict[str, float | None] = {d: None for d in DIMENSIONS}
    if not pool:
        warnings.append("no successful judge iteration: the result cannot be scored")
        return FinalResult("failed", method, pass_threshold, t, None, empty_dims, None, [], counts,
                           _dedup(warnings), used_refs, per_run, None, [], {d: [] for d in DIMENSIONS})
    # One judge run: the pool is its picked scores, in order, already combined (not a second time per result node)
    combined = part if len(runs) == 1 and part is not None else _combine(pool, method, t)
    warnings.extend(combined.notes)
    for run_id, it in used:
        warnings.extend(f"[{run_id} #{it.repetition}] {w}" for w in it.warnings)
    if len(used) == 1:
        summary = pool[0].summary
    else:
        summary = "\n".join(f"[{run_id} #{it.repetition}] {it.scores.summary}" for run_id, it in used if it.scores)
    final_dims: dict[str, float | None] = dict(combined.dimensions)
    failed_dims = [d for d in DIMENSIONS if t is not None and (final_dims[d] or 0.0) < t]
    return FinalResult(
        status="success",
        method=method,
        pass_threshold=pass_threshold,
        threshold_score=t,
        final_score=combined.score,
        final_dimensions=final_dims,
        passed=combined.passed,
        failed_dimensions=failed_dims,
        counts=counts,
        warnings=_dedup(warnings),
        used_iterations=used_refs,
        per_judge_run=per_run,
        summary=summary,
        overall_evidence=_dedup([e for s in pool for e in s.overall_evidence]),
        dimension_evidence={d: _dedup([e for s in pool for e in s.evidence.get(d, [])]) for d in DIMENSIONS},
    )
