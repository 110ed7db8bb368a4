"""The paired comparison `claw compare` gates on: per model and overall, the mean of B - A over the cases both sides
hold with its interval, p-value and minimum detectable effect; flipped verdicts; judge self-agreement. Details:
docs/compare.md (Details by module)."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Any

from clawstore.compare.scores import SideScores
from clawstore.stats.paired import Paired, paired
from clawstore.stats.reliability import Reliability, reliability

OVERALL = "(all models)"


@dataclass
class ModelPaired:
    model_id: str  # OVERALL: every model, each case's differences averaged over its models
    result: Paired
    confidence: float

    def verdict(self, margin: float) -> str:
        r = self.result
        if r.low is None or r.high is None:
            return "too few cases to tell"
        if r.below(margin):
            return "regressed"
        if r.low > margin:
            return "improved"
        if margin > 0 and r.low < -margin:
            return "too few cases to tell"  # the interval holds both "no change" and a drop beyond the margin
        return "no regression" if margin > 0 else "within noise"

    def to_json(self, margin: float) -> dict[str, Any]:
        return {"model_id": self.model_id, "confidence": self.confidence, "verdict": self.verdict(margin),
                **self.result.to_json()}


@dataclass
class Flip:
    model_id: str
    case_id: str
    a: bool  # passed on side A (every run repetition passed)
    b: bool

    def to_json(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "case_id": self.case_id, "passed_a": self.a, "passed_b": self.b}


@dataclass
class JudgeNoise:
    side: str  # "A" or "B"
    model_id: str
    judge_run_id: str
    reliability: Reliability

    def to_json(self) -> dict[str, Any]:
        return {"side": self.side, "model_id": self.model_id, "judge_run_id": self.judge_run_id,
                **self.reliability.to_json()}


def _case_score(reps: dict[int, list[float]]) -> float:
    return fmean([fmean(scores) for scores in reps.values()])


def paired_models(a: SideScores, b: SideScores, confidence: float, samples: int, seed: int) -> list[ModelPaired]:
    """Per model common to both sides, then overall (when more than one model)."""
    models = [m for m in sorted(a.scores) if m in b.scores]
    model_confidence = 1.0 - (1.0 - confidence) / max(1, len(models))
    out = []
    per_case: dict[str, list[float]] = {}
    for model in models:
        common = [c for c in sorted(a.scores[model]) if c in b.scores[model]]
        values_a = [_case_score(a.scores[model][c]) for c in common]
        values_b = [_case_score(b.scores[model][c]) for c in common]
        for case, x, y in zip(common, values_a, values_b, strict=True):
            per_case.setdefault(case, []).append(y - x)
        result = paired(values_a, values_b, f"{seed}/{model}", samples, model_confidence)
        if result is not None:
            out.append(ModelPaired(model, result, model_confidence))
    if len(out) > 1:
        diffs = [fmean(d) for d in per_case.values()]
        result = paired([0.0] * len(diffs), diffs, f"{seed}/{OVERALL}", samples, confidence)
        if result is not None:
            out.append(ModelPaired(OVERALL, result, confidence))
    return out


def flips(a: SideScores, b: SideScores) -> list[Flip]:
    """The (model, case) pairs whose verdict differs: a case passes when every run repetition passed."""
    out = []
    for model in sorted(set(a.verdicts) & set(b.verdicts)):
        for case in sorted(set(a.verdicts[model]) & set(b.verdicts[model])):
            passed_a, passed_b = all(a.verdicts[model][case].values()), all(b.verdicts[model][case].values())
            if passed_a != passed_b:
                out.append(Flip(model, case, passed_a, passed_b))
    return out


def judge_noise(side: SideScores, name: str) -> list[JudgeNoise]:
    """Per model and judge run plan, how far its repetitions of one run agree (overall score)."""
    out = []
    for (model, judge), runs in sorted(side.judge_runs.items()):
        found = reliability(list(runs.values()), side.threshold)
        if found is not None:
            out.append(JudgeNoise(name, model, judge, found))
    return out
