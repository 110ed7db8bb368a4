"""`utc_now` (graph/records.py) formats the time of day once a second: its text is what datetime's isoformat gives."""

from __future__ import annotations

import datetime as dt

import pytest

from clawstore.graph import records


def _isoformat(ns: int) -> str:
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=ns // 1000)
    return when.isoformat(timespec="microseconds")[:-6] + "Z"


@pytest.mark.parametrize("start", [0, 951_782_399_999_999_000, 1_796_256_000_000_000_000, 4_102_444_799_000_500_999])
def test_the_same_text_as_isoformat_across_seconds(start: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Within one second (the kept prefix), at its last microsecond, then the next second, minute and day.
    steps = [0, 1_000, 999_999_000, 1_000_000_000, 1_000_000_999, 60_000_000_000, 86_400_000_000_000, 5]
    for step in steps:
        ns = start + step
        monkeypatch.setattr(records.time, "time_ns", lambda ns=ns: ns)
        assert records.utc_now() == _isoformat(ns)


def test_now_is_now() -> None:
    before = dt.datetime.now(dt.UTC)
    stamp = dt.datetime.fromisoformat(records.utc_now())
    assert before <= stamp <= dt.datetime.now(dt.UTC)
