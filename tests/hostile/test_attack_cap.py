"""The memory cap every attack's `claw` process runs under (tests/hostile/attack.py `capped`: util-linux's prlimit,
or a preexec_fn's setrlimit where it is missing) is set in the child, soft and hard, and stops an allocation past it."""

from __future__ import annotations

import subprocess
import sys

from tests.hostile.attack import MEMORY_CAP, capped


def _python(code: str) -> subprocess.CompletedProcess[str]:
    argv, cap = capped([sys.executable, "-S", "-c", code])
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **cap)


def test_a_capped_process_has_the_cap_and_cannot_allocate_past_it() -> None:
    limits = _python("import resource; print(*resource.getrlimit(resource.RLIMIT_AS))")
    assert limits.returncode == 0 and limits.stdout.split() == [str(MEMORY_CAP)] * 2, limits
    past = _python(f"bytearray({MEMORY_CAP + (1 << 30)})")
    assert past.returncode == 1 and "MemoryError" in past.stderr, past
