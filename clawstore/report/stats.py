"""The report's statistics: per model, 95 % intervals on its mean score, pass rate and dimension means
(clustered by case), pass@k and pass^k over run repetitions; per judge and dimension, how much the
judge's repetitions of one run disagree (docs/compare.md, "Statistics")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from clawstore.query.rows import Row
from clawstore.query.schema import DIMENSIONS
from clawstore.stats.intervals import Interval
from clawstore.stats.paired import paired
from clawstore.stats.reliability import Reliability, reliability
from clawstore.stats.repetitions import PassK

CaseScores = Mapping[str, Mapping[str, float]]  # a campaign's case scores: model -> case -> score


OVERALL = "overall"


@dataclass
class ModelStats:
    score: Interval | None  # of the case scores (each the mean of its repetitions' final scores)
    pass_rate: Interval | None  # Wilson, over the cases with a verdict
    dimensions: dict[str, Interval] = field(default_factory=dict)
    pass_k: PassK | None = None  # with two or more run repetitions and a pass threshold

    def to_json(self) -> dict[str, Any]:
        return {"score_interval": self.score.to_json() if self.score else None,
                "pass_rate_interval": self.pass_rate.to_json() if self.pass_rate else None,
                "dimension_intervals": {d: i.to_json() for d, i in self.dimensions.items()},
                "pass_k": self.pass_k.to_json() if self.pass_k else None}


@dataclass
class JudgeReliability:
    judge_run_id: str
    dimension: str  # "overall" or a dimension
    judge_repetitions: int  # the most repetitions of one run
    reliability: Reliability

    def to_json(self) -> dict[str, Any]:
        return {"judge_run_id": self.judge_run_id, "dimension": self.dimension,
                "judge_repetitions": self.judge_repetitions, **self.reliability.to_json()}


def judge_reliability(judgements: Sequence[Row], threshold: float | None) -> list[JudgeReliability]:
    """Per judge run plan and dimension, over the runs it judged two or more times (successful
    judgements only: a failed call has no score)."""
    runs: dict[tuple[str, Any], list[Row]] = {}
    for j in judgements:
        runs.setdefault((str(j["judge_run_id"]), j["run_key"]), []).append(j)
    per_judge: dict[str, list[list[Row]]] = {}
    for (judge, _), rows in runs.items():
        if len(rows) >= 2:
            per_judge.setdefault(judge, []).append(rows)
    out = []
    dimensions = (OVERALL, *DIMENSIONS)
    values = itemgetter("overall_score", *DIMENSIONS)  # (one call per judgement, not one per dimension)
    for judge in sorted(per_judge):
        columns: list[list[Sequence[float]]] = [[] for _ in dimensions]
        for rows in per_judge[judge]:
            for column, scores in zip(columns, zip(*map(values, rows), strict=True), strict=True):
                column.append([v for v in scores if v is not None] if None in scores else scores)
        for dimension, groups in zip(dimensions, columns, strict=True):
            found = reliability(groups, threshold if dimension == OVERALL else None)
            if found is not None:
                out.append(JudgeReliability(judge, dimension, max(map(len, groups)), found))
    return out


def pick(rows: Sequence[Row], cases: Sequence[str], models: Sequence[str]) -> list[Row]:
    return [r for r in rows if (not cases or r["case_id"] in cases) and (not models or r["model_id"] in models)]


def thresholds(results: Sequence[Row]) -> float | None:
    """The verdict's threshold on the 0-10 scale (pass_threshold is a fraction of it, rounded as
    evaluate/aggregate.py's threshold_score rounds it, so that 0.7 is exactly 7.0)."""
    found = next((r["pass_threshold"] for r in results if r["pass_threshold"] is not None), None)
    return None if found is None else round(10.0 * float(found), 9)


def stats_json(stats: Mapping[str, ModelStats], model: str) -> dict[str, Any]:
    found = stats.get(model)
    return found.to_json() if found else {}


def paired_vs_baseline(campaigns: Sequence[CaseScores], samples: int = 2000) -> list[dict[str, Any]]:
    """Each campaign after the first against the first, per model, over the cases both scored (their
    final scores): what `claw compare` computes (clawstore.stats.paired), Bonferroni-adjusted over models."""
    if len(campaigns) < 2:
        return []
    baseline = campaigns[0]
    out = []
    for index, scores in enumerate(campaigns[1:], start=1):
        models = sorted(set(baseline) & set(scores))
        confidence = 1 - 0.05 / max(1, len(models))
        for model in models:
            common = sorted(set(baseline[model]) & set(scores[model]))
            found = paired([baseline[model][c] for c in common], [scores[model][c] for c in common],
                           f"view/{index}/{model}", samples, confidence)
            if found is not None:
                out.append({"campaign": index, "model_id": model, "confidence": confidence, **found.to_json()})
    return out
