"""`CostSum.add_to_build` (values/costs.py): a build log's cost fields summed in place are what the sum of CostSums
gave, field for field and bit for bit, from a new log's metrics or an older one's (cost alone, no counts)."""

from __future__ import annotations

import random
from typing import Any

from clawstore.store.documents import _build_metrics
from clawstore.values.costs import CostSum


def _metrics(rng: random.Random) -> dict[str, Any]:
    """A paid record's metrics: reported, priced, unknown or from before cost sources (no `cost_source`)."""
    cost = rng.choice([None, 0.0, 1e-9, 0.1, 0.2, 0.3, rng.random() / 7, 3, "0.5", float("nan")])
    metrics: dict[str, Any] = {"cost_usd": cost}
    source = rng.choice([None, "reported", "priced", "unknown", "bogus"])
    if source is not None:
        metrics["cost_source"] = source
    return metrics


def test_summed_in_place_as_the_sums_of_cost_sums() -> None:
    rng = random.Random(54)
    for start in (_build_metrics(), {"cost_usd": 0.25}, {}):  # a new log's, an older log's, none
        by_sums, in_place = dict(start), dict(start)
        for _ in range(300):
            part = CostSum.of_metrics(_metrics(rng))
            by_sums.update((CostSum.of_build(by_sums) + part).build_metrics())
            part.add_to_build(in_place)
            assert repr(in_place) == repr(by_sums)  # the same keys in the same order, the same values (a NaN: unknown)
            assert in_place["cost_usd"].hex() == by_sums["cost_usd"].hex()
        assert in_place["cost_unknown"] > 0 and in_place["cost_priced"] > 0 and in_place["cost_reported"] > 0
