"""Attempts of one request made before the error that ended it, carried by that error when it cannot count them itself:
a Ray worker lost under them, and the request sent again raised MissingApiKeyError (the restarted worker's environment
lacks the key) or another error of the worker's (builder/ray_client.py). A ProviderError counts them in its own `usage`
and `attempts`; any other error carries them here, for whoever records it (runners/llm_probe.py, evaluate/judge.py) to
count, whatever its type: their usage is unknown (a lost reply may have been billed), never dropped with the error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_ATTRIBUTE = "claw_earlier_attempts"


@dataclass(frozen=True)
class EarlierAttempts:
    usage: Any  # their usage, as providers/usage.py's Usage (this layer imports none): unknown
    log: tuple[dict[str, Any], ...]  # one entry each, as ProviderClient's attempt_log

    @property
    def count(self) -> int:
        return len(self.log)


def carry_earlier(exc: BaseException, earlier: EarlierAttempts) -> BaseException:
    """`exc`, carrying `earlier` (earlier_attempts)."""
    setattr(exc, _ATTRIBUTE, earlier)
    return exc


def earlier_attempts(exc: BaseException) -> EarlierAttempts | None:
    """The attempts `exc` carries from before it (carry_earlier), if any."""
    earlier = getattr(exc, _ATTRIBUTE, None)
    return earlier if isinstance(earlier, EarlierAttempts) else None
