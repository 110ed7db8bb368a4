"""One judge repetition: build the chat request, call the provider, validate, retry invalid replies.

The provider call is injected (`chat(body) -> ChatResult-like`), so this module holds no client
and no endpoint; the build layer binds `ProviderClient.chat` with the endpoint and timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clawstore.errors import ClawError, ConfigError
from clawstore.evaluate.judge_contract import JudgeContractError, JudgeScores, parse_judge_response
from clawstore.evaluate.redact import holds_no_secret, redact_text, redact_value
from clawstore.evaluate.specs import plain
from clawstore.values.canonical import field_values
from clawstore.values.costs import SENT_UNANSWERED, UNKNOWN, KnownPart
from clawstore.values.counts import counted
from clawstore.values.earlier import earlier_attempts
from clawstore.values.judge_options import RESERVED_REQUEST_KEYS, judge_request_options
from clawstore.values.prompt_cut import dense_warning

DEFAULT_JUDGE_ATTEMPTS = 3
JUDGE_STATUSES = ("success", "invalid", "provider_error", "timed_out", "failed")
INFRASTRUCTURE_STATUSES = ("provider_error", "timed_out", "failed")
TOKEN_FIELDS = ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens",
                "cached_input_tokens", "cache_write_tokens")


def resolve_judge_model(judge: Any) -> str:
    """A judge's model: the first of its extras `model` → `judge_model` → `model_id` → `judge_id`."""
    data = plain(judge)
    for key in ("model", "judge_model", "model_id", "judge_id"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    raise ConfigError("a judge needs a model (or at least a judge_id)", field="judges[].model")


def build_judge_request(judge: Any, system_prompt: str, user_prompt: str, repetition: int) -> dict[str, Any]:
    """The OpenAI-compatible chat body for one judge repetition.

    `request_options` and the judge's extra fields (`judge_request_options`) are merged at top level; `temperature`
    defaults to 0.0. The repetition index
    goes into `metadata` (string values, as OpenAI-style APIs require) so each repetition is a
    distinct request.
    """
    data = plain(judge)
    options = judge_request_options(data)
    for key in RESERVED_REQUEST_KEYS:
        if key in options:
            raise ConfigError(
                f"request_options may not set '{key}' (the harness sets it)",
                field=f"judges[{data.get('judge_id')}].request_options.{key}",
            )
    temperature = options.pop("temperature", None)
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        temperature = 0.0
    metadata = {"judge_id": str(data.get("judge_id") or ""), "judge_repetition": str(repetition)}
    extra_meta = options.pop("metadata", None)
    if isinstance(extra_meta, Mapping):
        metadata = {**{str(k): str(v) for k, v in extra_meta.items()}, **metadata}
    return {
        "model": resolve_judge_model(data),
        "messages": [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": user_prompt},
        ],
        "temperature": float(temperature),
        **options,
        "metadata": metadata,
    }


@dataclass
class JudgeIteration:
    """The outcome of one judge repetition (all its attempts). JSON-ready via `to_dict`."""

    status: str
    scores: JudgeScores | None
    attempts: list[dict[str, Any]]
    usage: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    judge_run_id: str | None = None
    repetition: int = 0
    judge_model: str | None = None

    @property
    def requests(self) -> int | None:
        """The requests its attempts sent, the client's retries included (`claw query`'s judgements.attempts); None
        when an attempt does not say (a judgement made before session 73)."""
        counts = [entry.get("requests") for entry in self.attempts]
        if not counts or not all(isinstance(n, int) and not isinstance(n, bool) for n in counts):
            return None
        return sum(counts)

    @property
    def infrastructure_failure(self) -> bool:
        """True when the failure is not the judge's answer (do not cache; retry next build)."""
        return self.status in INFRASTRUCTURE_STATUSES

    def to_dict(self) -> dict[str, Any]:
        out = field_values(self)
        out["scores"] = self.scores.to_dict() if self.scores else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeIteration:
        scores = data.get("scores")
        return cls(
            status=str(data["status"]),
            scores=JudgeScores.from_dict(scores) if scores else None,
            attempts=list(data.get("attempts") or []),
            usage=dict(data.get("usage") or {}),
            warnings=list(data.get("warnings") or []),
            judge_run_id=data.get("judge_run_id"),
            repetition=int(data.get("repetition") or 0),
            judge_model=data.get("judge_model"),
        )


def _usage_dict(usage: Any) -> dict[str, Any]:
    if usage is None:
        return {}
    if isinstance(usage, Mapping):
        return dict(usage)
    to_json = getattr(usage, "to_json", None)
    if callable(to_json):
        return dict(to_json())
    return {name: getattr(usage, name) for name in (*TOKEN_FIELDS, "cost_usd") if hasattr(usage, name)}


SENT_A_COST = "; another attempt reported a cost"


UNCOSTED = "_uncosted"  # (a summing total's mark, taken off before it is kept: see _add_usage)


def _add_usage(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    for name in TOKEN_FIELDS:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            total[name] += value
    # An attempt that counted tokens and reported no cost: the others' reported costs are not the sum's (priced from
    # all the tokens, else unknown, as providers/usage.py Usage.uncosted; before session 73 they were, exact).
    if usage.get("cost_usd") is None and not usage.get("usage_rejected") and (
            usage.get("input_tokens") or usage.get("output_tokens")):
        total[UNCOSTED] = True
    if usage.get("tokens_unknown") and not total.get("tokens_unknown"):  # a reply that counted none: unknown, not 0
        total["tokens_unknown"] = usage["tokens_unknown"]
    cost = usage.get("cost_usd")
    if usage.get("usage_rejected") and not total.get("usage_rejected"):
        # a reply's usage not believed (providers/usage.py Usage.rejected): the repetition's cost is unknown
        had_cost = total["cost_usd"] is not None
        total.update(cost_usd=None, cost_source=UNKNOWN, usage_rejected=usage["usage_rejected"])
        if had_cost:
            total["usage_rejected"] += SENT_A_COST
    if total.get("usage_rejected"):
        # (a cost an attempt sent is not summed: the reason says so, so that no declared price of 0 makes the sum 0)
        if cost is not None and not total["usage_rejected"].endswith(SENT_A_COST):
            total["usage_rejected"] += SENT_A_COST
        return
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        total["cost_usd"] = (total["cost_usd"] or 0.0) + float(cost)
    if total.get(UNCOSTED):
        total["cost_usd"] = None
    if usage.get("cost_source") == "priced":  # (a batch line claw priced: the record says so)
        total["cost_source"] = "priced"


def _message_text(result: Any) -> str:
    message = getattr(result, "message", None)
    if message is None and isinstance(result, Mapping):
        message = result.get("message")
    content = (message or {}).get("content") if isinstance(message, Mapping) else None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def _provider_failure(exc: BaseException) -> str | None:
    """provider_error / timed_out for a ProviderError-like exception, None for anything else."""
    if not hasattr(exc, "timed_out") or not hasattr(exc, "code"):
        return None
    return "timed_out" if getattr(exc, "timed_out", False) or exc.code == "timeout" else "provider_error"


def _failure_text(exc: BaseException, failure: str | None) -> str:
    """A provider's failure as a run's error says it (`transport_error: ConnectError talking to …`); anything else with
    its exception's name. (Before session 78 a provider's was `ProviderError: provider transport_error: …`, whose extra
    words pushed "Connection refused" past the cut of the build's failure line.)"""
    message = getattr(exc, "message", None)
    if failure is not None and isinstance(message, str):
        return f"{getattr(exc, 'code', 'provider_error')}: {message}"
    return f"{type(exc).__name__}: {exc}"


def run_judge_iteration(
    chat: Callable[[dict[str, Any]], Any],
    body: dict[str, Any],
    attempts: int = DEFAULT_JUDGE_ATTEMPTS,
    *,
    judge_run_id: str | None = None,
    repetition: int = 0,
    redact_secrets: bool = True,
) -> JudgeIteration:
    """Call the judge until its reply satisfies the contract, at most `attempts` times.

    Only an invalid reply is retried here: provider errors and timeouts were already retried by
    the provider client, so they end the iteration as an infrastructure failure (recorded, not
    cached). A ClawError other than a provider error (e.g. a missing API key) propagates, unless it carries attempts
    sent before it (values/earlier.py): then it is recorded as a failure, their spend with it.
    """
    attempts = max(int(attempts), 1)
    usage: dict[str, Any] = {name: 0 for name in TOKEN_FIELDS}
    usage["cost_usd"] = None
    known = KnownPart()  # what its believed answers spent: a repetition whose cost is not known keeps it
    log: list[dict[str, Any]] = []
    warnings: list[str] = []
    status, scores = "invalid", None
    for index in range(attempts):
        entry: dict[str, Any] = {"attempt": index, "status": None, "response": None, "error": None}
        log.append(entry)
        try:
            result = chat(body)
        except Exception as exc:  # classify; every failure is recorded, none escapes as a traceback
            failure = _provider_failure(exc)
            # Attempts it carries from before it (values/earlier.py: a Ray worker lost under them, their spend
            # unknown): a ClawError is recorded then, as any other failure (raised, it would take them out of every
            # record: before session 80 a judge's lost request was in none when the retry found no key).
            earlier = None if failure else earlier_attempts(exc)
            if failure is None and isinstance(exc, ClawError) and earlier is None:
                raise
            if earlier is not None:
                entry_usage = _usage_dict(earlier.usage)
            elif failure is None:
                # Anything else its call raised may have come after the request left (a Ray worker's error of any type;
                # runners/llm_probe.py reads it so): unknown, never 0 tokens that declared prices make a known 0.0.
                entry_usage = {**_usage_dict(getattr(exc, "usage", None)), "cost_usd": None, "cost_source": UNKNOWN,
                               "usage_rejected": SENT_UNANSWERED}
            else:
                entry_usage = _usage_dict(getattr(exc, "usage", None))
            _add_usage(usage, entry_usage)
            status = failure or "failed"
            entry.update(status=status, error=_failure_text(exc, failure), usage=entry_usage,
                         **counted("requests", earlier.count if earlier else getattr(exc, "attempts", None)))
            warnings.append(f"attempt {index + 1} ended with status '{status}'")
            break
        reply_usage = getattr(result, "usage", None)
        raw_usage = getattr(result, "raw_usage", None)
        if hasattr(reply_usage, "as_reported"):  # a provider's reply (ChatResult): without token counts, unknown
            # its answer's own usage (its `usage` holds its client's failed attempts' too): what it spent at least
            own_usage = getattr(result, "own_usage", None)
            if own_usage is not None:
                known.add(_usage_dict(own_usage.as_reported(raw_usage)))
            reply_usage = reply_usage.as_reported(raw_usage)  # (not 0: providers/usage.py)
        entry_usage = _usage_dict(reply_usage)
        _add_usage(usage, entry_usage)
        if entry_usage.get("usage_rejected"):
            warnings.append(f"attempt {index + 1}: usage not believed, cost unknown: {entry_usage['usage_rejected']}")
        messages = body.get("messages")
        if (cut := dense_warning(messages if isinstance(messages, list) else [], raw_usage)) is not None:
            warnings.append(f"attempt {index + 1}: {cut}")  # (a heuristic: the judgement stands, warned)
        text = _message_text(result)
        entry.update(response=text, usage=entry_usage, **counted("requests", getattr(result, "attempts", None)))
        try:
            scores = parse_judge_response(text)
        except JudgeContractError as exc:
            status = "invalid"
            entry.update(status="invalid", error=str(exc))
            warnings.append(f"attempt {index + 1}: invalid judge output: {exc}")
            continue
        status = "success"
        entry["status"] = "success"
        warnings.extend(scores.warnings)
        if index:
            warnings.append(f"succeeded after {index} retried attempt(s)")
        break
    if status == "invalid":
        warnings.append(f"no valid judge output in {len(log)} attempt(s)")
    if all((entry.get("usage") or {}).get("nothing_sent") is True for entry in log):
        usage["nothing_sent"] = True  # no request of it left (an answer, even one refused, has no such usage): 0
    usage.pop(UNCOSTED, None)
    # (builder/eval_layer.py prices its tokens when its answers reported no cost)
    usage.update(known.of(usage, none_believed=True))
    iteration = JudgeIteration(
        status=status,
        scores=scores if status == "success" else None,
        attempts=log,
        usage=usage,
        warnings=warnings,
        judge_run_id=judge_run_id,
        repetition=repetition,
        judge_model=body.get("model") if isinstance(body.get("model"), str) else None,
    )
    if redact_secrets:
        _redact_iteration(iteration)
    return iteration


def _redact_iteration(iteration: JudgeIteration) -> None:
    """Secrets out of the attempts, warnings and scores. One quick look at the three together: almost no judgement
    holds one, and then each is kept as it is (not redacted one by one, nor the scores copied through a dict)."""
    scores = iteration.scores
    if holds_no_secret([iteration.attempts, iteration.warnings, scores.to_dict() if scores is not None else None]):
        return
    iteration.attempts = redact_value(iteration.attempts)
    iteration.warnings = [redact_text(w) for w in iteration.warnings]
    if scores is not None:
        iteration.scores = JudgeScores.from_dict(redact_value(scores.to_dict()))
