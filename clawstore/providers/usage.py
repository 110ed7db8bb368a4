"""Token usage and cost, normalised from OpenAI-compatible `usage` objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from clawstore.values.costs import SENT_UNANSWERED, UNKNOWN

# A usage is stored (RunArtifact `usage.normalized`, a judge's summed usage) under the names of its
# fields, and of a record's metrics, but for the cached prompt tokens: artifacts always named them so.
_STORED_AS = {"cached_tokens": "cached_input_tokens"}


def stored_key(name: str) -> str:
    """The key a Usage field (a record's metric name) is stored under in an artifact's usage."""
    return _STORED_AS.get(name, name)


def stored_tokens(usage: Mapping[str, Any], names: Iterable[str], known: bool = True) -> dict[str, Any]:
    """The counts `names` (record metric names) of a usage as artifacts store it, 0 where it has none; None
    (unknown) each when not `known` (a reply's usage not believed: Usage.rejected)."""
    if not known:
        return dict.fromkeys(names)
    return {name: usage.get(stored_key(name)) or 0 for name in names}


def _int(value: Any) -> int:
    # Providers send ints, occasionally floats or numeric strings; anything else counts as 0.
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float):
        return max(int(value), 0)
    if isinstance(value, str):
        try:
            return max(int(float(value)), 0)
        except ValueError:
            return 0
    return 0


def _cost(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _byok_cost(raw: Mapping[str, Any]) -> float | None:
    """What an OpenRouter call made with the user's own provider key (BYOK, `is_byok: true`) cost: OpenRouter's fee
    (`cost`, 0 while it waives it) and what the provider billed that key (`cost_details.upstream_inference_cost`);
    None (not reported) when the provider's part is not said: the fee alone would read as all of it."""
    details = raw.get("cost_details")
    upstream = _cost(details.get("upstream_inference_cost")) if isinstance(details, Mapping) else None
    return None if upstream is None else (_cost(raw.get("cost")) or 0.0) + upstream


@dataclass(frozen=True)
class Usage:
    """Normalised usage of one or more calls. `cost_usd` is None when no call reported a cost.

    `rejected` says why a kept reply's own `usage` was not believed (providers/reply_check.py): its numbers
    are not counted, so this usage's tokens and cost are unknown (cost None, `cost_source` unknown), and
    stay so in any sum that includes it. `tokens_unknown` says why a reply counted no tokens (a server that sends
    `usage: {cost}` only, or none): its tokens are unknown in any sum, its reported cost stays known (a cost not
    reported is unknown, `cost_source` unknown: no price makes counts nobody sent a cost). `nothing_sent`: no request
    of these calls left (no connection could be made; `Usage.unsent()`, the identity of a sum): they cost a known 0
    whatever the prices (runners/pricing.py record_cost); one call that went out makes the sum's False."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    cost_source: str | None = None  # "priced" when claw priced it (a batch line), else the provider's or none
    rejected: str | None = None
    tokens_unknown: str | None = None
    nothing_sent: bool = False

    @classmethod
    def unsent(cls) -> Usage:
        """The usage of calls none of which left (the start of a sum of attempts or turns: none made yet)."""
        return cls(nothing_sent=True)

    @classmethod
    def not_believed(cls, why: str) -> Usage:
        """The usage of a reply kept for its answer whose `usage` broke the bounds (`why`): unknown, never 0."""
        return cls(cost_source=UNKNOWN, rejected=why)

    @classmethod
    def from_raw(cls, raw: Any) -> Usage:
        """Normalise a provider `usage` object (OpenAI / OpenRouter field names)."""
        if not isinstance(raw, dict):
            return cls()
        prompt_details = raw.get("prompt_tokens_details")
        prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
        completion_details = raw.get("completion_tokens_details")
        completion_details = completion_details if isinstance(completion_details, dict) else {}
        input_tokens = _int(raw.get("prompt_tokens", raw.get("input_tokens")))
        output_tokens = _int(raw.get("completion_tokens", raw.get("output_tokens")))
        total = _int(raw.get("total_tokens")) or input_tokens + output_tokens
        reasoning = _int(raw.get("reasoning_tokens")) or _int(completion_details.get("reasoning_tokens"))
        return cls(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=total,
            reasoning_tokens=reasoning,
            cached_tokens=_int(prompt_details.get("cached_tokens")),
            cache_write_tokens=_int(prompt_details.get("cache_write_tokens")),
            cost_usd=_byok_cost(raw) if raw.get("is_byok") is True else _cost(raw.get("cost")),
        )

    @classmethod
    def from_stored(cls, normalized: Mapping[str, Any], cost_usd: float | None = None, cost_source: str | None = None,
                    rejected: str | None = None, tokens_unknown: str | None = None, nothing_sent: bool = False
                    ) -> Usage:
        """A usage as an artifact stored it (`normalized()`, its cost apart); TypeError on a stranger key."""
        names = {stored_key(name): name for name in TOKEN_FIELDS}
        unknown = set(normalized) - names.keys()
        if unknown:
            raise TypeError(f"usage: unexpected {sorted(unknown)}")
        return cls(**{names[key]: value for key, value in normalized.items()}, cost_usd=cost_usd,
                   cost_source=cost_source, rejected=rejected, tokens_unknown=tokens_unknown, nothing_sent=nothing_sent)

    def as_reported(self, raw_usage: Mapping[str, Any] | None) -> Usage:
        """This reply's usage, or unknown when its own `raw_usage` counts no input or no output tokens (a method:
        evaluate/ may not import providers/, and asks the reply's usage itself)."""
        if self.rejected is None and not tokens_reported(raw_usage):
            if self.cost_usd is not None and self.cost_source is None:  # a cost it reported stays known
                return self.without_tokens(NOT_REPORTED)
            return Usage.not_believed(NOT_REPORTED)  # (its cost unknown: no declared price may make one)
        return self

    def __add__(self, other: Usage) -> Usage:
        if self.nothing_sent:  # (nothing of it left: the sum is the other's)
            return other
        if other.nothing_sent:
            return self
        sums = {name: getattr(self, name) + getattr(other, name) for name in TOKEN_FIELDS}
        rejected = self.rejected or other.rejected
        if rejected:  # one call's cost not known: the sum's is not either (a partial sum would look like all of it)
            return Usage(**sums, cost_source=UNKNOWN, rejected=rejected)
        tokens_unknown = self.tokens_unknown or other.tokens_unknown
        if UNKNOWN in (self.cost_source, other.cost_source):  # (a reply that counted no tokens and reported no cost)
            return Usage(**sums, cost_source=UNKNOWN, tokens_unknown=tokens_unknown)
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        elif self.uncosted or other.uncosted:  # (the other's cost alone would read as all of it: priced or unknown)
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        source = "priced" if "priced" in (self.cost_source, other.cost_source) else None
        return Usage(**sums, cost_usd=cost, cost_source=source, tokens_unknown=tokens_unknown)

    @property
    def uncosted(self) -> bool:
        """Did these calls count tokens and report no cost? (In a sum with a reported cost, that cost is not the sum's:
        before session 73 it was, a 500 that counted 150 tokens dropped from the run's `reported` cost.)"""
        return self.cost_usd is None and bool(self.input_tokens or self.output_tokens)

    def without_tokens(self, why: str) -> Usage:
        """This usage, of a reply that counted no tokens (`why`): its tokens unknown; its cost known only when the
        provider reported it (claw's own pricing of a batch line priced counts nobody sent)."""
        reported = self.cost_usd is not None and self.cost_source is None
        return replace(self, cost_usd=self.cost_usd if reported else None, cost_source=None if reported else UNKNOWN,
                       tokens_unknown=why)

    def normalized(self) -> dict[str, int]:
        """The token counts as a JSON object (RunArtifact `usage.normalized`)."""
        return {stored_key(name): getattr(self, name) for name in TOKEN_FIELDS}

    def to_json(self) -> dict[str, Any]:
        values: dict[str, Any] = {**self.normalized(), "cost_usd": self.cost_usd, "cost_source": self.cost_source}
        if values["cost_source"] is None:  # (the provider's cost, or none: as artifacts always said)
            del values["cost_source"]
        if self.rejected is not None:
            values["usage_rejected"] = self.rejected
        if self.tokens_unknown is not None:
            values["tokens_unknown"] = self.tokens_unknown
        if self.nothing_sent:  # (only then: an answer's usage is stored as it always was)
            values["nothing_sent"] = True
        return values


NOT_REPORTED = "usage: the reply reports no prompt and completion token counts"
TURN_NOT_REPORTED = "usage: an OpenClaw turn reports no input and output token counts"
TURN_NO_RESULT = "usage: an OpenClaw turn ended without a result (crashed, timed out, stopped): what it sent is unknown"
# (SENT_UNANSWERED, a request sent and its reply never read whole: values/costs.py, for the judge's too)
WORKER_LOST = ("usage: a request's Ray worker died before its reply came back (the request may have been sent and "
               "answered): what the provider counted is unknown")
RUN_LOST = ("usage: an OpenClaw run's Ray worker died under it and the run was made again: what the lost run's "
            "requests counted is unknown")
UNREADABLE_REPLY = ("usage: a 2xx reply claw could not read as an answer (malformed): the provider may have billed it, "
                    "what it counted is unknown")
# Why a usage is unknown when no cost was sent, only token counts are missing (not a reply's numbers refused, one of
# which may be a cost): at prices of 0 its cost is a known 0 (runners/pricing.py record_cost).
COUNTS_ALONE = frozenset({NOT_REPORTED, TURN_NOT_REPORTED, TURN_NO_RESULT, SENT_UNANSWERED, WORKER_LOST,
                          RUN_LOST, UNREADABLE_REPLY})


def counts_alone_unknown(usage: Mapping[str, Any]) -> bool:
    """Is a stored usage (an artifact's, a judge repetition's sum) unknown only for token counts nobody sent, with
    no cost sent either?"""
    if usage.get("cost_usd") is not None:
        return False
    rejected = usage.get("usage_rejected")
    return rejected in COUNTS_ALONE if rejected else bool(usage.get("tokens_unknown"))


# The names a reply's `usage` counts its input and its output tokens by (OpenAI's, the Responses API's).
REPLY_TOKEN_NAMES = (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens"))


def tokens_reported(raw_usage: Mapping[str, Any] | None,
                    names: tuple[tuple[str, ...], tuple[str, ...]] = REPLY_TOKEN_NAMES) -> bool:
    """Does a `usage` object count its input and its output tokens (one of `names` each)? A server that sends none
    (or half, or nulls: `"prompt_tokens": null`) leaves them unknown, not 0; one that says 0 counted 0."""
    inputs, outputs = names
    return isinstance(raw_usage, Mapping) and any(raw_usage.get(k) is not None for k in inputs) and any(
        raw_usage.get(k) is not None for k in outputs)


def as_reported(usage: Usage, raw_usage: Mapping[str, Any] | None) -> Usage:
    """A reply's usage (ChatResult `usage`, its own `raw_usage`) as far as the reply counted it: unknown when it
    counts no input or no output tokens, never 0 tokens that a model's declared price would make a 0.0 cost
    (the subject's calls, runners/llm_probe.py, the judge's, evaluate/judge.py, a batch line's)."""
    return usage.as_reported(raw_usage)


TOKEN_FIELDS = tuple(f.name for f in fields(Usage) if f.name.endswith("_tokens"))
