"""values/clock.py formats the time of day once a second: its texts are what datetime's isoformat gives, to the
microsecond (records) and to the millisecond (a run's trace), across seconds, minutes and days."""

from __future__ import annotations

import datetime as dt

import pytest

from clawstore.values import clock


def _isoformat(ns: int, timespec: str) -> str:
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=ns // 1000)
    return when.isoformat(timespec=timespec).replace("+00:00", "Z")


@pytest.mark.parametrize("start", [0, 951_782_399_999_999_000, 1_796_256_000_000_000_000, 4_102_444_799_000_500_999])
def test_the_same_text_as_isoformat_across_seconds(start: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Within one second (the kept prefix), at its last millisecond and microsecond, then the next second, minute and
    # day, and back.
    steps = [0, 1_000, 999_000, 1_000_000, 999_999_000, 999_999_999, 1_000_000_000, 1_000_000_999, 1_000_999_999,
             60_000_000_000, 86_400_000_000_000, 5]
    for step in steps:
        ns = start + step
        monkeypatch.setattr(clock.time, "time_ns", lambda ns=ns: ns)
        assert clock.utc_now() == _isoformat(ns, "microseconds")
        assert clock.utc_now_millis() == _isoformat(ns, "milliseconds")


def test_now_is_now() -> None:
    before = dt.datetime.now(dt.UTC) - dt.timedelta(milliseconds=1)  # (the millisecond stamp drops the microseconds)
    stamps = [dt.datetime.fromisoformat(clock.utc_now()), dt.datetime.fromisoformat(clock.utc_now_millis())]
    assert all(before <= stamp <= dt.datetime.now(dt.UTC) for stamp in stamps)
