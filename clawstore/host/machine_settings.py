"""The machine's numeric settings, read from the environment and checked (one clear line for a bad value).

The variables: docs/building.md (Settings of the machine; Details by module)."""

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


def s3_read_timeout() -> float:
    """Seconds an S3 remote's answer may go silent (botocore's own 60 held a pull that long on each stalled pack)."""
    return seconds_setting("CLAW_S3_READ_TIMEOUT", 20.0, low=0.1, high=DAY_S)


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
        s3_read_timeout()
