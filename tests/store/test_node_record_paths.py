"""A node's record made in one pass (session 56): the same answers as the slower forms it replaces, on generated
values, well-formed and hostile.

- `metrics_problem`'s fast acceptance never accepts what one of `_METRIC_RULES` refuses, nor refuses anything;
- `make_record` gives `RecordDoc(...).to_json()`, key for key and in the same order (so the same canonical bytes).
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest

from clawstore.graph.records import make_record
from clawstore.store.documents import _METRIC_RULES, METRIC_FIELDS, Metrics, RecordDoc, metrics_problem
from clawstore.values.canonical import canonical_json
from clawstore.values.costs import SOURCES

ODD_VALUES: list[Any] = [None, 0, 1, 7, 10**12, 10**12 + 1, -1, 2**70, True, False, 0.0, 1.0, 2.5, -0.5, 1e-05,
                         1e7, 1e7 + 1, 1e300, math.nan, math.inf, -math.inf, "3", "", [], {}, 3.0, -0.0,
                         10**400, -10**400]  # (ints past a float's range: a hostile record's, parsed from JSON)


def rules_problem(metrics: dict[str, Any]) -> str | None:
    """metrics_problem as it was: every rule in turn."""
    for name, rule in _METRIC_RULES.items():
        problem = rule(metrics.get(name))
        if problem:
            return f"metrics.{name}: {problem}"
    return None


def generated_metrics(rng: random.Random) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for name in METRIC_FIELDS:
        if rng.random() < 0.8:
            metrics[name] = rng.choice(ODD_VALUES) if rng.random() < 0.3 else (
                rng.randrange(0, 5000) if "tokens" in name else rng.random() * rng.choice((1e-6, 1e-3, 1.0, 1e6)))
    if rng.random() < 0.7:
        metrics["cost_source"] = rng.choice([*SOURCES, "made-up", 3, None, ["reported"]])
    return metrics


def test_metrics_problem_answers_as_every_rule_does() -> None:
    rng = random.Random(56)
    seen = {True: 0, False: 0}
    for _ in range(5000):
        metrics = generated_metrics(rng)
        expected = rules_problem(metrics)
        assert metrics_problem(metrics) == expected, metrics
        seen[expected is None] += 1
    assert min(seen.values()) > 500  # both answers well represented


@pytest.mark.parametrize("name", METRIC_FIELDS)
@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
def test_each_odd_value_of_each_field(name: str, value: Any) -> None:
    metrics = {"input_tokens": 1, "cost_usd": 0.5, name: value}
    assert metrics_problem(metrics) == rules_problem(metrics)


def record_fields(rng: random.Random, metrics: dict[str, Any]) -> dict[str, Any]:
    key = "blake3:" + rng.randbytes(32).hex()
    return dict(kind=rng.choice(["run", "judge", "checks", "result"]), key=key,
                address={"model_id": "m", "case_id": f"c{rng.randrange(99)}", "repetition": rng.randrange(3)},
                status=rng.choice(["ok", "provider_error"]), cacheable=rng.random() < 0.8,
                outputs={"artifact": "blake3:" + rng.randbytes(32).hex(), "input_document": key},
                metrics=metrics, summary={"x": rng.random()}, error=rng.choice([None, {"code": "e", "message": "m"}]),
                started_at="2026-12-04T23:00:00.000000Z", finished_at="2026-12-04T23:00:01.000000Z", build_id="b1")


def test_make_record_is_the_record_doc_key_for_key_in_order() -> None:
    rng = random.Random(7)
    made = 0
    for _ in range(2000):
        fields = record_fields(rng, generated_metrics(rng))
        old_metrics = Metrics.of(fields["metrics"])
        problem = metrics_problem(old_metrics.to_json())
        if problem:
            with pytest.raises(ValueError, match=re.escape(problem)):
                make_record(**fields)
            continue
        expected = RecordDoc(**{**fields, "metrics": old_metrics}).to_json()
        record = make_record(**fields)
        assert list(record.items()) == list(expected.items())
        assert canonical_json(record) == canonical_json(expected)
        made += 1
    assert made > 500
