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
    tally = VerdictTally()
    for found in verdicts.values():
        tally.add(found)
    return tally.pass_k()


class VerdictTally:
    """What pass_k reads of the cases' verdicts, counted as the cases come: per number of verdicts, the cases and
    those that passed at least once and every time (a few integers, not a list per case)."""

    def __init__(self) -> None:
        self.counts: dict[int, list[int]] = {}  # verdicts in a case -> [cases, passed once, passed every time]

    def add(self, verdicts: Sequence[bool]) -> None:
        count = self.counts.setdefault(len(verdicts), [0, 0, 0])
        count[0] += 1
        count[1] += any(verdicts)
        count[2] += all(verdicts)

    def pass_k(self) -> PassK | None:
        k = max(self.counts, default=0)
        if k < 2:
            return None
        full, at_least_once, every_time = self.counts[k]
        at_k, all_k = wilson(at_least_once, full), wilson(every_time, full)
        assert at_k is not None and all_k is not None  # (the case with k verdicts is among them)
        return PassK(k, at_k, all_k, sum(n for n, _, _ in self.counts.values()) - full)
