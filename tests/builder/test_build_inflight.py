"""Real builds against the stand-in: a slow provider keeps every slot of max_concurrency busy; against one answering
at once (claw's own CPU the bottleneck) the build tries 1 request in flight, and says so in its JSON progress,
unless `--fixed-concurrency` (the controller alone: tests/builder/test_inflight.py; the limit's hold on the slots:
tests/builder/test_lanes.py)."""

from __future__ import annotations

import json
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


def limits(progress: str) -> list[int]:
    """The in-flight limits a build's JSON progress reported, in order ("in_flight": each time it moved)."""
    return [e["limit"] for e in map(json.loads, progress.splitlines()) if e["event"] == "in_flight"]


def test_a_slow_provider_sees_every_slot_busy_throughout_the_build(
        standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 50 ms a request, 8 at once: 160 a second, a fifth of a core of claw's: the provider bounds the throughput
    built(standin, tmp_path, monkeypatch, 200, 8, 0.05)
    assert quarters(standin.requests) == [8, 8, 8, 8]


def test_a_provider_answering_at_once_gets_fewer_requests_in_flight_unless_fixed(
        standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = built(standin, tmp_path / "fixed", monkeypatch, 1000, 16, 0.0, "--fixed-concurrency")
    assert limits(fixed) == []
    standin.reset()
    moved = limits(built(standin, tmp_path / "adaptive", monkeypatch, 1000, 16, 0.0))
    assert moved and moved[0] == 1 and max(moved) <= 16, moved  # (claw busy: its first probe went straight to 1)
