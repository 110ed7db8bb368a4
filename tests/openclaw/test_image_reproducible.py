"""The OpenClaw image is reproducible: a build from scratch gives the ID of the image CI built and loaded.

The engine fixture loaded the image `.ci/openclaw_image.sh` built for these inputs (in CI: by `.ci/run`'s
prepare step, on this machine or restored from its cache). This test builds it again in a fresh work
directory — only the downloads (Debian packages, npm tarballs, the Node wheel) come from the cache — and
compares the two IDs. Slow (one full image build, ~2 minutes on an idle machine), and run in CI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.openclaw.engine import IMAGE_SCRIPT, DockerEngine

pytestmark = pytest.mark.timeout(1200)


def test_a_second_build_of_the_image_has_the_same_id(docker_engine: DockerEngine, tmp_path: Path) -> None:
    loaded = docker_engine.docker("image", "inspect", "--format", "{{.Id}}", docker_engine.image)
    assert loaded.returncode == 0, loaded.stderr
    built = subprocess.run(["bash", str(IMAGE_SCRIPT), "--build-only", str(tmp_path / "again")],
                           capture_output=True, text=True, timeout=1100, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.strip() == loaded.stdout.strip(), built.stderr[-3000:]
    assert (tmp_path / "again" / "layer.tar").stat().st_size > 100_000_000
