"""How many of its campaign's results a head holds: what `claw report` and `claw view` say under `Head:` when a build
filtered by --case/--model, or stopped, left some never built, and whether the models' case sets differ (their means
are then over different cases). From the head's `expected` (documents.read_expected: written by builds since session
80; a head without it gets no coverage) and the report's rows, never by planning the campaign."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NAMED = 3  # models without a result named in the line, at most


@dataclass(frozen=True)
class Coverage:
    """`expected_cases`: the cases each model expects (the report's --case filter's, if any); `held`: each expected
    model's results in the head (its rows); `cases_differ`: the models with results do not all have the same cases."""

    expected_cases: int
    held: dict[str, int]
    cases_differ: bool

    @property
    def expected(self) -> int:
        return self.expected_cases * len(self.held)

    @property
    def results(self) -> int:
        # (a model's rows of cases the configs dropped since a filtered build kept them are no result it expects)
        return sum(min(n, self.expected_cases) for n in self.held.values())

    @property
    def not_built(self) -> int:
        return self.expected - self.results

    def to_json(self) -> dict[str, Any]:
        return {"expected": self.expected, "results": self.results, "not_built": self.not_built,
                "expected_cases": self.expected_cases, "cases_differ": self.cases_differ,
                "models": {m: {"results": n, "expected": self.expected_cases} for m, n in self.held.items()}}

    def line(self) -> str | None:
        """The line under `Head:` when results were never built (None: the head holds them all)."""
        if self.not_built <= 0:
            return None
        empty = [m for m, n in self.held.items() if n == 0]
        more = f" and {len(empty) - NAMED} more" if len(empty) > NAMED else ""
        none = f", none of {', '.join(empty[:NAMED])}{more}" if empty else ""
        return (f"Coverage: {self.results:,} of {self.expected:,} results ({self.not_built:,} not built{none}: "
                f"claw status lists them; claw build without --case/--model builds them)")

    def differ_line(self) -> str | None:
        """The line saying the models' means are not comparable (None: they are over the same cases)."""
        if not self.cases_differ:
            return None
        return ("Cases differ: the models' results are of different cases (Model Summary: COVERAGE), so their means "
                "are not comparable")

    def cell(self, model: str, cases: int) -> str:
        """A model's COVERAGE cell: its results of the cases it expects ("-": a model the campaign no longer has)."""
        return f"{cases}/{self.expected_cases}" if model in self.held else "-"


def coverage_of(expected: Mapping[str, Any] | None, held: Mapping[str, int], digests: Mapping[str, bytes],
                cases: Sequence[str], models: Sequence[str]) -> Coverage | None:
    """The coverage of a head whose `expected` is given (None: not said, no coverage); `held` and `digests`: each
    model's rows and the digest of their case ids (the same digest: the same cases); `cases`, `models`: the report's
    filters (what the report shows is expected of those alone)."""
    if expected is None:
        return None
    wanted = expected["models"] if not models else [m for m in expected["models"] if m in models]
    per_model = len(set(cases)) if cases else expected["cases"]
    shown = {digests[m] for m, n in held.items() if n and m in digests}
    return Coverage(per_model, {m: held.get(m, 0) for m in wanted}, len(shown) > 1)
