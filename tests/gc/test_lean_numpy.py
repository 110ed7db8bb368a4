"""gc's walk by arrays imports numpy without OpenBLAS's pool of threads (store/core/lean_numpy.py), leaving the
environment its children inherit, and a caller's own OPENBLAS_NUM_THREADS, as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import os
import clawstore.store.reach_arrays  # (what gc's walk imports)
print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def _threads_after_import(env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True,
                          timeout=60)
    threads, value = done.stdout.split()
    return int(threads), value


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2,
                    reason="counts a process's threads by /proc, on a machine where OpenBLAS would start some")
def test_the_walk_imports_numpy_on_one_thread_and_leaves_the_environment_as_it_was() -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    assert _threads_after_import(env) == (1, "None")  # (numpy's own import starts a thread per core but one)
    assert _threads_after_import({**env, "OPENBLAS_NUM_THREADS": "2"}) == (2, "2")  # (the caller's choice stands)
