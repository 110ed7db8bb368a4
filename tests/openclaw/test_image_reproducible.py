"""The OpenClaw image is reproducible: a build from scratch gives the ID of the image CI built.

`.ci/run`'s prepare step (or the first real-engine test on a machine) built the image for these inputs
into its cache, and the engine fixture loads that archive (test_real_engine.py checks the engine runs
that very ID). This test builds it again in a fresh work directory (in RAM when there is room,
tests/openclaw/engine.py) — only the downloads (Debian packages, npm tarballs, the Node wheel) come
from the cache — and compares the two IDs. It needs no engine, so it is scheduled apart from the
real-engine tests (tests/conftest.py) and runs beside them.
Slow (one full image build, ~2 minutes on an idle machine), and run in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.openclaw.engine import IMAGE_SCRIPT, cached_image_id, in_ci, scratch_dir

pytestmark = pytest.mark.timeout(1200)


def test_a_second_build_of_the_image_has_the_same_id(tmp_path: Path) -> None:
    expected = cached_image_id()
    if expected is None:
        message = "the OpenClaw image is not built yet (python3 -m tests.openclaw.engine prepare builds it)"
        if in_ci():
            pytest.fail(f"{message}; CI=true: .ci/run prepares it", pytrace=False)
        pytest.skip(message)
    scratch = scratch_dir(tmp_path / "scratch", "image")  # the build's work and its output
    try:
        built = subprocess.run(["bash", str(IMAGE_SCRIPT), "--build-only", str(scratch / "again")],
                               capture_output=True, text=True, timeout=1100, check=False,
                               env={**os.environ, "TMPDIR": str(scratch)})
        assert built.returncode == 0, built.stderr[-3000:]
        assert built.stdout.strip() == expected, built.stderr[-3000:]
        assert (scratch / "again" / "layer.tar").stat().st_size > 100_000_000
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
