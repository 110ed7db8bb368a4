"""The judge's JSON answer: find it in the reply text and validate it.

Tolerant where it costs nothing (a ```json fence, prose around the object, extra keys), strict
where it matters: every dimension and the overall score must be present and within 0..10.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from clawstore.evaluate.evidence import DIMENSIONS
from clawstore.values import jsontext
from clawstore.values.canonical import field_values
from clawstore.values.jsontext import first_json_object

SCORE_MIN, SCORE_MAX = 0.0, 10.0
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.S)


class JudgeContractError(ValueError):
    """The judge's reply does not satisfy the JSON contract; the message names the field."""


@dataclass(frozen=True)
class JudgeScores:
    summary: str
    dimensions: dict[str, float]
    evidence: dict[str, list[str]]
    overall_score: float
    overall_evidence: list[str]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return field_values(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeScores:
        return cls(
            summary=str(data["summary"]),
            dimensions={k: float(v) for k, v in data["dimensions"].items()},
            evidence={k: list(v) for k, v in data["evidence"].items()},
            overall_score=float(data["overall_score"]),
            overall_evidence=list(data["overall_evidence"]),
            warnings=list(data.get("warnings") or []),
        )


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a reply: whole text, else a fenced block, else the first object in prose."""
    stripped = text.strip()
    if not stripped:
        raise JudgeContractError("the judge returned no content")
    try:
        value = jsontext.loads_reply(stripped)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    for block in _FENCE.findall(stripped):
        found = first_json_object(block)
        if found is not None:
            return found
    found = first_json_object(stripped)
    if found is None:
        raise JudgeContractError("the judge reply contains no JSON object")
    return found


def _score(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        if value is None:
            raise JudgeContractError(f"{where} is missing")
        raise JudgeContractError(f"{where} must be a number, got {type(value).__name__}")
    score = float(value)
    if math.isnan(score) or not SCORE_MIN <= score <= SCORE_MAX:
        raise JudgeContractError(f"{where} must be within 0..10, got {value}")
    return score


def _evidence(value: Any, where: str) -> list[str]:
    if value is None:
        raise JudgeContractError(f"{where} is missing")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise JudgeContractError(f"{where} must be a list of strings")
    return [item.strip() for item in value if item.strip()]


def _block(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        raise JudgeContractError(f"{where} is missing")
    if not isinstance(value, dict):
        raise JudgeContractError(f"{where} must be an object, got {type(value).__name__}")
    return value


def validate_judge_object(obj: dict[str, Any]) -> JudgeScores:
    summary = obj.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise JudgeContractError("summary must be a non-empty string" if summary is not None else "summary is missing")
    dims_obj = _block(obj, "dimensions", "dimensions")
    dimensions: dict[str, float] = {}
    evidence: dict[str, list[str]] = {}
    warnings: list[str] = []
    for dim in DIMENSIONS:
        entry = _block(dims_obj, dim, f"dimensions.{dim}")
        evidence[dim] = _evidence(entry.get("evidence"), f"dimensions.{dim}.evidence")
        dimensions[dim] = _score(entry.get("score"), f"dimensions.{dim}.score")
        if not evidence[dim]:
            warnings.append(f"dimensions.{dim}.evidence is empty")
    overall = _block(obj, "overall", "overall")
    overall_evidence = _evidence(overall.get("evidence"), "overall.evidence")
    overall_score = _score(overall.get("score"), "overall.score")
    return JudgeScores(summary.strip(), dimensions, evidence, overall_score, overall_evidence, warnings)


def parse_judge_response(text: str) -> JudgeScores:
    """Parse and validate a judge reply; raises JudgeContractError naming the offending field."""
    return validate_judge_object(extract_json_object(text))
