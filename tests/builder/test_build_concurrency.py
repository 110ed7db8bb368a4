"""A run profile's max_concurrency is what the provider sees: never more requests at once, and that
many when there is enough work (the Ray executor's version: tests/distributed/test_ray_build.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.workspace import SECRET, many_cases


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_provider_never_sees_more_requests_at_once_than_the_run_profile_allows(
        standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: int) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    standin.set_default({"content": "forty-two", "latency": 0.15})
    ws = many_cases(tmp_path / "ws", cases=6, concurrency=concurrency)  # 12 runs
    done = claw("build", "--suite", "main", "--run-profile", "rp", cwd=ws.root)
    assert done.returncode == 0, done.stderr
    assert len(standin.requests) == 12 and standin.peak == concurrency
