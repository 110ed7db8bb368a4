"""bench/openclaw_bench.py at smoke size, on the real engine the other real-engine tests share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.openclaw_bench import measure
from tests.openclaw.engine import DockerEngine


def test_openclaw_bench_runs_one_run(docker_engine: DockerEngine, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    saved = dict(os.environ)
    try:
        assert measure(docker_engine.host, docker_engine.image, tmp_path, 1) == 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert "harness overhead per run" in capsys.readouterr().out
