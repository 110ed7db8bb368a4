"""Real builds against the stand-in: a slow provider keeps every slot of max_concurrency busy; against one answering
at once (claw's own CPU the bottleneck) the build keeps fewer requests in flight than `--fixed-concurrency` does
(the controller alone: tests/builder/test_inflight.py)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn, peak_at_once
from tests.config.workspace_builder import claw
from tests.support.workspace import SECRET, many_cases


def built(standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: int, concurrency: int,
          latency: float, *flags: str) -> str:
    """A cold build of `cases` cases x two models, the stand-in answering after `latency`: its JSON progress."""
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    standin.set_default({"content": "forty-two", "latency": latency})
    ws = many_cases(tmp_path / "ws", cases=cases, concurrency=concurrency)
    done = claw("build", "--suite", "main", "--run-profile", "rp", "--progress", "json", *flags, cwd=ws.root)
    assert done.returncode == 0, done.stderr
    assert len(standin.requests) == 2 * cases
    return done.stderr


def quarters(requests: list[dict]) -> list[int]:
    """The stand-in's peak of requests at once in each quarter of the build (by arrival)."""
    requests = sorted(requests, key=lambda r: r["received_at"])
    first, last = requests[0]["received_at"], requests[-1]["received_at"]
    bounds = [first + (last - first) * i / 4 for i in range(5)]
    return [peak_at_once([r for r in requests if r["received_at"] < end], start)
            for start, end in zip(bounds, bounds[1:], strict=False)]


def in_flight_second_half(progress: str) -> float:
    """How many runs were under way at once on average (at each start and end) in the second half of a build's
    runs, by its JSON progress: a run's "started" is sent once its thread begins it, its "finished" once its
    outcome is handled."""
    events = [e["event"] for e in map(json.loads, progress.splitlines()) if e["event"] in ("started", "finished")]
    running, seen = 0, []
    for event in events:
        running += 1 if event == "started" else -1
        seen.append(running)
    return statistics.mean(seen[len(seen) // 2:])


def test_a_slow_provider_sees_every_slot_busy_throughout_the_build(
        standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 50 ms a request, 8 at once: 160 a second, a fifth of a core of claw's: the provider bounds the throughput
    built(standin, tmp_path, monkeypatch, 200, 8, 0.05)
    assert quarters(standin.requests) == [8, 8, 8, 8]


def test_a_provider_answering_at_once_gets_fewer_requests_in_flight_than_with_fixed_concurrency(
        standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (the two builds in turn, in the same seconds of this machine's load)
    fixed = in_flight_second_half(built(standin, tmp_path / "fixed", monkeypatch, 1500, 16, 0.0, "--fixed-concurrency"))
    standin.reset()
    adaptive = in_flight_second_half(built(standin, tmp_path / "adaptive", monkeypatch, 1500, 16, 0.0))
    assert adaptive < 0.85 * fixed, (adaptive, fixed)
