"""OpenAI-compatible provider client (OpenRouter by default), shared by runners and the judge.

Public API:
    Endpoint(base_url, api_key_env)        .identity() -> {"base_url"}, .api_key(), .gateway
    default_endpoint(), resolve_endpoint(model_extras, path=, field=)
    ProviderClient(backoff_base=0.5, ...)  .chat(endpoint, body, timeout=None, retries=5) -> ChatResult
    ChatResult(message, usage, provider_meta, attempts, attempt_log, raw_usage, latency_s)
    Usage.from_raw(raw), Usage + Usage, .normalized(), .cost_usd
    ProviderError(code, message, retryable, status_code, timed_out, usage, ...), MissingApiKeyError

The client (and httpx with it) is imported on first use: planning a build only needs endpoints.
"""

from __future__ import annotations

from typing import Any

from clawstore.providers.endpoint import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    Endpoint,
    default_endpoint,
    resolve_endpoint,
)
from clawstore.providers.errors import MissingApiKeyError, ProviderError
from clawstore.providers.usage import Usage

_FROM_CLIENT = ("ChatResult", "ProviderClient", "is_retryable_status", "parse_retry_after")


def __getattr__(name: str) -> Any:
    if name in _FROM_CLIENT:
        from clawstore.providers import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "ChatResult",
    "Endpoint",
    "MissingApiKeyError",
    "ProviderClient",
    "ProviderError",
    "Usage",
    "default_endpoint",
    "is_retryable_status",
    "parse_retry_after",
    "resolve_endpoint",
]
