"""What a cost is known to be: reported by the provider, priced from declared `pricing`, or unknown (never 0), and sums
that keep what they know apart from what they do not. Details: docs/plan.md (Details by module)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import floor, isfinite, log10
from typing import Any

REPORTED = "reported"  # the provider's `usage.cost`
PRICED = "priced"  # tokens × the model's declared `pricing`
UNKNOWN = "unknown"  # neither: not free, not known
SOURCES = (REPORTED, PRICED, UNKNOWN)
# Why a request's usage is unknown when it was sent and its reply never read whole (providers/usage.py, whose other
# reasons are there; here for evaluate/judge.py, which imports no provider).
SENT_UNANSWERED = ("usage: a request was sent and its reply never read whole (timed out, connection lost, too large): "
                   "what the provider counted is unknown")
PRICE_KEYS = ("input", "output", "cacheRead", "cacheWrite")  # a `pricing`'s prices, USD per 1M tokens
PRICE_NAMES = ("pricing", "cost")  # a model's prices, under either name: in no key (docs/building.md, Keys)
PAID_KINDS = ("run", "judge")  # the nodes that call a provider; checks and results cost nothing
# Decimals of a cost claw sums itself, as JSON and CSV show it (`shown_usd`): OpenRouter states no precision for
# `usage.cost`, the responses seen carry 1e-8 USD or coarser (0.00000285, 0.0360795; the stand-in's 1e-6), and declared
# prices of up to four decimals per 1M tokens price a token to 1e-10; past that a float sum carries only its noise.
USD_DIGITS = 10


def declared_prices(model_extras: Mapping[str, Any]) -> Any:
    """A model's `pricing`, else `cost` (OpenClaw's name; `claw validate` refuses both): an empty `pricing:` (null)
    beside a `cost` hid the cost."""
    raw = model_extras.get("pricing")
    return model_extras.get("cost") if raw is None else raw


def missing_prices(model_extras: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """A declared `pricing` (or `cost`) that leaves out `input` or `output` (null counts as left out): its name and the
    prices it lacks. It prices nothing (runners/pricing.py `pricing`: a price not declared is unknown, not 0), so a cost
    its provider does not report stays unknown: said by `claw validate` and the `--max-cost` refusal. None when both
    are there, or when nothing is declared (`pricing: {}` and `pricing:` included)."""
    name = "pricing" if model_extras.get("pricing") is not None else "cost"
    raw = model_extras.get(name)
    if not isinstance(raw, Mapping) or not raw:
        return None
    missing = [key for key in ("input", "output") if raw.get(key) is None]
    return (name, missing) if missing else None


def missing_prices_text(name: str, missing: list[str]) -> str:
    """What a partial `pricing` means, in one phrase."""
    lacks = " and ".join(f"'{key}'" for key in missing)
    return (f"its `{name}` has no {lacks} price, and prices nothing without both 'input' and 'output' (USD per 1M "
            "tokens; 0 for a free one)")


def source_of(metrics: Mapping[str, Any] | None) -> str:
    """A record's cost source (older records, without one: a number was reported, None is unknown)."""
    metrics = metrics or {}
    source = metrics.get("cost_source")
    if source in SOURCES:
        return str(source)
    return UNKNOWN if known_cost(metrics.get("cost_usd")) is None else REPORTED


def known_cost(value: Any) -> float | None:
    """A cost as a float; None when it is not a finite number (unknown: a NaN summed in would hide every known cost),
    an int past a double's range included (isfinite of it raises OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        cost = float(value)
    except OverflowError:
        return None
    return cost if isfinite(cost) else None


def shown_usd(value: float | None) -> float | None:
    """A cost claw summed, as it is shown: rounded to USD_DIGITS decimals (0.1 + 0.1 + 0.1 is 0.3, not
    0.30000000000000004); None (unknown) stays None. What is stored keeps its own number. A known cost too small for
    those decimals (under 5e-11 USD: a declared price of 0.0001 per 1M tokens, a token) keeps USD_DIGITS significant
    digits instead: rounded, it read 0.0, free."""
    return None if value is None else _shown(value)


def _shown(value: float) -> float:
    shown = round(value, USD_DIGITS) + 0.0  # (+ 0.0: no -0.0)
    return shown if shown or not value else float(f"{value:.{USD_DIGITS}g}")


def usd(value: float, digits: int = 5) -> str:
    """A known cost as text, the one form every table, line and message shows (view.js `usd` is its twin): `digits`
    decimals when they show a digit of it that is not 0 (a column of them aligned), else as many as show its first
    two significant digits, never in scientific notation: 1.2e-06 is 0.0000012, not 0.00000 (a cheap model's run of a
    fraction of a cent, read as free, and a column of them summing to more than its parts). 0 is 0.00000."""
    fixed = f"{value + 0.0:.{digits}f}"  # (+ 0.0: no -0.00000)
    if not value or not isfinite(value) or fixed.strip("-0."):
        return fixed
    return f"{value:.{1 - floor(log10(abs(value)))}f}".rstrip("0")


@dataclass(frozen=True)
class CostSum:
    """The cost of some paid nodes: the sum of the known ones and how many of each source."""

    known_usd: float = 0.0
    reported: int = 0
    priced: int = 0
    unknown: int = 0

    @classmethod
    def of(cls, cost_usd: Any, source: str | None = None) -> CostSum:
        """One paid node's cost (`source` None: inferred as for an older record)."""
        cost = known_cost(cost_usd)
        source = source if source in SOURCES else (UNKNOWN if cost is None else REPORTED)
        if cost is None or source == UNKNOWN:
            return cls(unknown=1)
        return cls(known_usd=cost, reported=int(source == REPORTED), priced=int(source == PRICED))

    @classmethod
    def of_metrics(cls, metrics: Mapping[str, Any] | None) -> CostSum:
        """A record's cost; an unknown one with its known part (`cost_known_usd`: what it spent at least), `≥` that."""
        metrics = metrics or {}
        spent = cls.of(metrics.get("cost_usd"), source_of(metrics))
        known = known_cost(metrics.get("cost_known_usd")) if spent.unknown else None
        return CostSum(known_usd=known, unknown=1) if known else spent

    @classmethod
    def total(cls, parts: Iterable[CostSum]) -> CostSum:
        """Their sum, the known costs compensated (CostFold)."""
        fold = CostFold()
        for part in parts:
            fold.add(part)
        return fold.sum()

    def __add__(self, other: CostSum) -> CostSum:
        return CostSum(self.known_usd + other.known_usd, self.reported + other.reported,
                       self.priced + other.priced, self.unknown + other.unknown)

    @property
    def count(self) -> int:
        return self.reported + self.priced + self.unknown

    @property
    def all_unknown(self) -> bool:
        """Nothing of it known: every part unknown, none with a known part (a node that spent at least something)."""
        return self.count > 0 and self.unknown == self.count and not self.known_usd

    @property
    def usd(self) -> float | None:
        """The total when every part is known; None (unknown) otherwise."""
        return None if self.unknown else self.known_usd

    @property
    def shown(self) -> float | None:
        """`usd` as JSON shows it (`shown_usd`)."""
        return None if self.unknown else shown_usd(self.known_usd)

    @property
    def shown_known(self) -> float:
        """`known_usd` as JSON shows it (`shown_usd`)."""
        return _shown(self.known_usd)

    def cell(self, digits: int = 5) -> str:
        """For a table cell: `?` when nothing is known, `≥x` when part is unknown, else the number."""
        if self.all_unknown:
            return "?"
        return ("≥" if self.unknown else "") + usd(self.known_usd, digits)

    def notes(self) -> str:
        """Which parts are not the provider's: " (3 of 10 unknown, 2 of 10 priced)", or ""."""
        notes = [f"{n} of {self.count} {what}" for n, what in ((self.unknown, UNKNOWN), (self.priced, PRICED)) if n]
        return f" ({', '.join(notes)})" if notes else ""

    def usd_text(self, digits: int = 6) -> str:
        """As a spend is printed: "0.001200 USD", "≥0.001200 USD (6 of 8 unknown)", "? USD (8 of 8 unknown)"."""
        if not self.unknown and not self.priced:  # every cost reported (a progress line per paid node)
            return f"{usd(self.known_usd, digits)} USD"
        return f"{self.cell(digits)} USD{self.notes()}"

    def text(self, digits: int = 5) -> str:
        """The cell and its notes: "≥0.01230 (3 of 10 unknown, 2 of 10 priced)"."""
        return self.cell(digits) + self.notes()

    def sources(self) -> dict[str, int]:
        """{source: nodes} of the sources present (JSON, and the COST_FROM columns)."""
        counts = {REPORTED: self.reported, PRICED: self.priced, UNKNOWN: self.unknown}
        return {name: n for name, n in counts.items() if n}

    @classmethod
    def of_build(cls, metrics: Mapping[str, Any]) -> CostSum:
        """What a build log's `metrics` say it spent (older logs: the cost alone, no counts)."""
        return cls(float(metrics.get("cost_usd") or 0.0), int(metrics.get("cost_reported") or 0),
                   int(metrics.get("cost_priced") or 0), int(metrics.get("cost_unknown") or 0))

    def build_metrics(self) -> dict[str, Any]:
        """The build log's cost fields (inverse of `of_build`)."""
        return {"cost_usd": self.known_usd, "cost_reported": self.reported, "cost_priced": self.priced,
                "cost_unknown": self.unknown}

    def add_to_build(self, metrics: dict[str, Any]) -> None:
        """Add this cost to a build log's `metrics` in place: what `metrics.update((of_build(metrics) +
        self).build_metrics())` does, without the two sums made and read back per paid node."""
        metrics["cost_usd"] = float(metrics.get("cost_usd") or 0.0) + self.known_usd
        metrics["cost_reported"] = int(metrics.get("cost_reported") or 0) + self.reported
        metrics["cost_priced"] = int(metrics.get("cost_priced") or 0) + self.priced
        metrics["cost_unknown"] = int(metrics.get("cost_unknown") or 0) + self.unknown


class CostFold:
    """CostSums added up one at a time, their known costs summed with Neumaier's compensation: a plain float sum of ten
    0.1 is 0.9999999999999999, and of a report's thousands of small costs drifts further; this one is 1.0, and equal to
    math.fsum of the same costs in every trial of 2,000 random campaigns (1 to 5,000 costs of 1e-12 to 1e-2 USD), in
    constant memory whatever the campaign's size. (A build's running sum, a part per paid node in its hot path, stays a
    plain sum: `add_to_build`.)"""

    __slots__ = ("known", "error", "reported", "priced", "unknown")

    def __init__(self) -> None:
        self.known = self.error = 0.0
        self.reported = self.priced = self.unknown = 0

    def add(self, part: CostSum) -> None:
        value, known = part.known_usd, self.known
        total = known + value
        self.error += (known - total) + value if abs(known) >= abs(value) else (value - total) + known
        self.known = total
        self.reported += part.reported
        self.priced += part.priced
        self.unknown += part.unknown

    def sum(self) -> CostSum:
        return CostSum(self.known + self.error, self.reported, self.priced, self.unknown)


class KnownPart:
    """What a paid node whose cost is unknown spent at least (store/documents.py KNOWN_PART): its believed answers'
    usage, summed as they come (an llm_probe run's turns, runners/llm_probe.py; a judge repetition's attempts,
    evaluate/judge.py), then `of` the node's own summed usage. Each usage in the form artifacts store it
    (providers/usage.py `Usage.to_json`). runners/pricing.py `with_known_part` prices its tokens when the answers
    reported no cost; docs/building.md, "An unknown cost with a known part"."""

    __slots__ = ("answers", "cost_usd", "input_tokens", "output_tokens")

    def __init__(self) -> None:
        self.answers = 0  # believed
        self.cost_usd: float | None = None  # of those that reported one (one that reported none adds nothing)
        self.input_tokens = 0
        self.output_tokens = 0

    def add(self, answer: Mapping[str, Any]) -> None:
        """An answer's own usage (not its failed attempts'): counted when believed (its numbers not refused, its
        tokens counted, its cost not unknown)."""
        if answer.get("usage_rejected") or answer.get("tokens_unknown") or answer.get("cost_source") == UNKNOWN:
            return
        self.answers += 1
        self.input_tokens += int(answer.get("input_tokens") or 0)
        self.output_tokens += int(answer.get("output_tokens") or 0)
        cost = answer.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost_usd = (self.cost_usd or 0.0) + float(cost)

    def of(self, usage: Mapping[str, Any], none_believed: bool = False) -> dict[str, Any]:
        """The known part of a node whose usage (all its attempts', summed) is `usage`: empty when its cost is known,
        none of it left, or none of its answers was believed; else its answers' cost when they reported one, and
        their tokens when the node's are unknown. `none_believed`: with no answer believed, its tokens still (0 each,
        which every reader takes as no known part: a judge repetition's, as it always kept them)."""
        if (self.answers == 0 and not none_believed) or usage.get("nothing_sent") or (
                usage.get("cost_usd") is not None and usage.get("cost_source") != UNKNOWN):
            return {}
        part: dict[str, Any] = {} if self.cost_usd is None else {"cost_known_usd": self.cost_usd}
        if usage.get("usage_rejected") or usage.get("tokens_unknown") or usage.get("cost_source") == UNKNOWN:
            part.update(input_tokens_known=self.input_tokens, output_tokens_known=self.output_tokens)
        return part
