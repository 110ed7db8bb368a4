"""The machine's numeric settings, read from the environment.

    CLAW_BACKOFF_BASE          seconds the first retry of a provider request may wait (doubling after,
                               up to 30 s); default 0.5
    CLAW_STORE_RETRY_SECONDS   how long a build keeps writing answers the store refused; default 120
    CLAW_REMOTE_PUSH_INTERVAL  seconds between the interim pushes of `build --remote`; default 5
    CLAW_CLAIM_TTL             seconds a build's claim on a node outlives its last heartbeat; default 30
    CLAW_BATCH_POLL_S          seconds between polls of provider batches (`build --batch --wait`); default 30

Unset or empty means the default. Anything else that is not a finite number in the setting's range is
refused (exit 2, one line naming the variable): a typo must not silently become the default, nor a
traceback, nor `nan` seconds. `build` checks them all before it pulls, plans or sends anything.
"""

from __future__ import annotations

import os

from clawstore.errors import UsageError

BACKOFF_CAP_S = 30.0
DAY_S = 86_400.0


def seconds_setting(name: str, default: float, *, low: float, high: float) -> float:
    """`$name` as a number of seconds from `low` to `high`, or `default` when it is unset or empty."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # false for nan too
        raise UsageError(f"${name}: expected a number of seconds from {low:g} to {high:g}; got {text[:40]!r}")
    return value


def backoff_base() -> float:
    return seconds_setting("CLAW_BACKOFF_BASE", 0.5, low=0.0, high=BACKOFF_CAP_S)


def store_retry_seconds() -> float:
    return seconds_setting("CLAW_STORE_RETRY_SECONDS", 120.0, low=0.0, high=DAY_S)


def remote_push_interval() -> float:
    return seconds_setting("CLAW_REMOTE_PUSH_INTERVAL", 5.0, low=0.1, high=DAY_S)


def claim_ttl() -> float:
    return seconds_setting("CLAW_CLAIM_TTL", 30.0, low=0.2, high=DAY_S)


def batch_poll_seconds() -> float:
    return seconds_setting("CLAW_BATCH_POLL_S", 30.0, low=0.05, high=DAY_S)


def check_build_settings(remote: bool) -> None:
    """Refuse a malformed setting a build would read later, before anything is pulled or paid."""
    backoff_base()
    store_retry_seconds()
    claim_ttl()
    batch_poll_seconds()
    if remote:
        remote_push_interval()
