"""Declared model prices (`pricing`, USD per 1M tokens) and the one formula that prices tokens with them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clawstore.store.documents import KNOWN_PART
from clawstore.values.costs import PRICE_KEYS, PRICED, REPORTED, SOURCES, UNKNOWN, declared_prices, known_cost

PER_MILLION = 1e6


def pricing(model_extras: dict[str, Any]) -> dict[str, float] | None:
    """USD per 1M tokens from a suite model's (or judge's) `pricing` (or `cost`) extra; None when not given, or when
    it leaves out `input` or `output`: a price not declared is unknown, not 0 (cache prices are optional)."""
    raw = declared_prices(model_extras)
    if not isinstance(raw, dict) or "input" not in raw or "output" not in raw:
        return None
    prices: dict[str, float] = {}
    for key in PRICE_KEYS:
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            return None
        prices[key] = float(value)
    return prices


def priced_cost(prices: dict[str, float], input_tokens: float, output_tokens: float,
                cache_read_tokens: float = 0, cache_write_tokens: float = 0) -> float:
    """USD for these tokens at these prices. An OpenAI-compatible provider counts cached tokens among
    the input ones: callers pass them as input (never cheaper than declared); OpenClaw counts them apart."""
    tokens = {"input": input_tokens, "output": output_tokens, "cacheRead": cache_read_tokens,
              "cacheWrite": cache_write_tokens}
    return round(sum(tokens[k] * prices.get(k, 0.0) for k in PRICE_KEYS) / PER_MILLION, 12)


def is_free(prices: dict[str, float] | None) -> bool:
    """Are these declared prices all 0 (a free model: any tokens cost 0)? (No per-request price can be declared.)"""
    return prices is not None and not any(prices.values())


def record_cost(metrics: dict[str, Any], model_extras: dict[str, Any], source: str | None = None,
                counts_alone: bool = False, nothing_sent: bool = False) -> dict[str, Any]:
    """A paid record's metrics with `cost_usd` and `cost_source`: the provider's cost (`reported`),
    else its tokens at the model's declared prices (`priced`), else `unknown` (cost None, never 0).
    `source`: what the runner already knows of its cost (OpenClaw prices its own). `counts_alone`: its usage is
    unknown only for token counts nobody sent, no cost sent either (providers/usage.py counts_alone_unknown): at
    prices all 0 its cost is a known 0, `priced` (unknown tokens × 0). `nothing_sent`: no request of it left (its
    usage's `nothing_sent`: the connection refused, no address): 0 tokens, a known 0 at any price, declared or not."""
    if nothing_sent:
        return {**metrics, "cost_usd": 0.0, "cost_source": PRICED}
    cost = known_cost(metrics.get("cost_usd"))
    if cost is None and counts_alone and is_free(pricing(model_extras)):
        return {**metrics, "cost_usd": 0.0, "cost_source": PRICED}
    if source in SOURCES:
        known = cost is not None and source != UNKNOWN
        return {**metrics, "cost_usd": cost if known else None, "cost_source": source if known else UNKNOWN}
    if cost is not None:
        return {**metrics, "cost_usd": cost, "cost_source": REPORTED}
    prices = pricing(model_extras)
    if prices is None:
        return {**metrics, "cost_usd": None, "cost_source": UNKNOWN}
    priced = priced_cost(prices, metrics.get("input_tokens") or 0, metrics.get("output_tokens") or 0)
    return {**metrics, "cost_usd": priced, "cost_source": PRICED}



def with_known_part(metrics: dict[str, Any], usage: Mapping[str, Any], model_extras: dict[str, Any],
                    tokens_known: bool) -> dict[str, Any]:
    """A record's metrics (record_cost's) with what a node whose cost is unknown spent at least, from its usage (an
    OpenClaw transcript's answered requests, an llm_probe run's or a judge repetition's believed answers): their
    cost, else their tokens at the declared prices; their tokens when the node's are unknown (not `tokens_known`).
    Unchanged when its cost is known."""
    if metrics.get("cost_source") != UNKNOWN:
        return metrics
    part = {name: usage[name] for name in KNOWN_PART if name in usage and (name == "cost_known_usd"
                                                                          or not tokens_known)}
    prices = pricing(model_extras)
    if "cost_known_usd" not in part and prices is not None and part.get("input_tokens_known") is not None:
        part["cost_known_usd"] = priced_cost(prices, part["input_tokens_known"], part.get("output_tokens_known") or 0)
    return {**metrics, **part}
