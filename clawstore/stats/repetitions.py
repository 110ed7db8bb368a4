"""pass@k and pass^k over cases run k times, with Wilson intervals.

With every one of a case's k run repetitions judged pass or fail, pass@k is the share of cases that
passed at least once in k tries, pass^k the share that passed all k times (k = the repetitions; a case
with fewer verdicts than k is left out, and counted apart). Each case is one Bernoulli outcome, so the
Wilson interval over cases is the clustered one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clawstore.stats.intervals import Interval, wilson


@dataclass(frozen=True)
class PassK:
    k: int
    at_k: Interval  # pass@k
    all_k: Interval  # pass^k
    left_out: int  # cases with fewer than k verdicts

    def to_json(self) -> dict[str, Any]:
        return {"k": self.k, "pass_at_k": self.at_k.to_json(), "pass_all_k": self.all_k.to_json(),
                "cases_left_out": self.left_out}


def pass_k(verdicts: Mapping[str, Sequence[bool]]) -> PassK | None:
    """From each case's run verdicts; None unless some case has two or more."""
    k = max((len(v) for v in verdicts.values()), default=0)
    if k < 2:
        return None
    full = [v for v in verdicts.values() if len(v) == k]
    at_k, all_k = wilson(sum(any(v) for v in full), len(full)), wilson(sum(all(v) for v in full), len(full))
    assert at_k is not None and all_k is not None  # (the case with k verdicts is among them)
    return PassK(k, at_k, all_k, len(verdicts) - len(full))
