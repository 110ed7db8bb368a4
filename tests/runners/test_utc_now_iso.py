"""`utc_now_iso` (runners/artifact.py, a run's trace and clock) formats the time of day once a second: its text is what
`datetime.now(UTC).isoformat(timespec="milliseconds")` gives, `Z` for the offset."""

from __future__ import annotations

import datetime as dt

import pytest

from clawstore.runners import artifact


def _isoformat(ns: int) -> str:
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=ns // 1000)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.mark.parametrize("start", [0, 951_782_399_999_999_000, 1_796_256_000_000_000_000, 4_102_444_799_000_500_999])
def test_the_same_text_as_isoformat_across_seconds(start: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Within one second (the kept prefix), at its last millisecond, then the next second, minute and day, and back.
    steps = [0, 1_000, 999_000, 1_000_000, 999_999_999, 1_000_000_000, 1_000_999_999, 60_000_000_000,
             86_400_000_000_000, 5]
    for step in steps:
        ns = start + step
        monkeypatch.setattr(artifact.time, "time_ns", lambda ns=ns: ns)
        assert artifact.utc_now_iso() == _isoformat(ns)


def test_now_is_now() -> None:
    before = dt.datetime.now(dt.UTC) - dt.timedelta(milliseconds=1)  # (the stamp drops the microseconds)
    stamp = dt.datetime.fromisoformat(artifact.utc_now_iso())
    assert before <= stamp <= dt.datetime.now(dt.UTC)
