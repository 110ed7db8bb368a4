"""Errors raised by the provider client."""

from __future__ import annotations

from typing import Any

from clawstore.errors import ClawError
from clawstore.providers.usage import Usage
from clawstore.values.urls import named_variable, shown_url


class _Portable:
    """Errors that cross a process boundary whole (a distributed build's workers raise them)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self).__new__, (type(self),), {**self.__dict__, "args": self.args})


class MissingApiKeyError(_Portable, ClawError):
    """The endpoint's API-key variable is unset or empty. Raised before any request is sent.

    The message names the variable (not a name that looks like a key pasted in its place), never a value.
    """

    exit_code = 2

    def __init__(self, variable: str, base_url: str, why: str = "is not set"):
        self.variable = variable
        self.base_url = base_url
        super().__init__(f"{named_variable(variable)} {why} (API key for {shown_url(base_url)})")


class ProviderError(_Portable, ClawError):
    """A chat request failed for good: not retryable, or its retries were used up.

    `code` is one of `http_error`, `timeout`, `transport_error`, `invalid_response`, `cancelled`.
    `usage` is what the failed attempts still cost (bodies that reported usage are counted).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        status_code: int | None = None,
        timed_out: bool = False,
        provider_code: str | None = None,
        usage: Usage | None = None,
        attempts: int = 1,
        attempt_log: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ):
        self.code = code
        self.message = message
        self.retryable = retryable
        self.status_code = status_code
        self.timed_out = timed_out
        self.provider_code = provider_code
        self.usage = usage if usage is not None else Usage()
        self.attempts = attempts
        self.attempt_log = attempt_log or []
        self.metadata = metadata or {}
        super().__init__(f"provider {code}: {message}")

    @property
    def cost_usd(self) -> float | None:
        return self.usage.cost_usd
