"""Shared helpers for the store tests: running `claw` and small scripts as real processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent
CLAW = [sys.executable, "-c", "import sys; from clawstore.cli import main; sys.exit(main())"]


def env(**extra: str) -> dict[str, str]:
    result = dict(os.environ)
    result["PYTHONPATH"] = str(REPO) + os.pathsep + result.get("PYTHONPATH", "")
    result.pop("CLAW_STORE", None)
    result.update(extra)
    return result


def claw(*args: str | Path, cwd: Path | None = None, input: bytes | None = None,
         extra_env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """Run the real `claw` CLI in a fresh process."""
    return subprocess.run(
        [*CLAW, *map(str, args)], cwd=cwd, input=input, capture_output=True,
        env=env(**(extra_env or {})), timeout=timeout,
    )


def script(name: str, *args: str | Path, **kwargs: object) -> subprocess.Popen[bytes]:
    """Start one of the helper scripts in this directory as a separate process."""
    return subprocess.Popen(
        [sys.executable, str(HERE / name), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(), **kwargs,  # type: ignore[arg-type]
    )


def json_like(size: int, seed: int = 0) -> bytes:
    """Deterministic JSON-lines bytes: compressible like real run artifacts."""
    rnd = random.Random(seed)
    words = ["assistant", "tool_call", "content", "tokens", "latency", "model", "case", "message"]
    parts, total, i = [], 0, 0
    while total < size:
        line = (
            f'{{"sequence":{i},"event_type":"{rnd.choice(words)}","value":{rnd.random()!r},'
            f'"text":"{" ".join(rnd.choice(words) for _ in range(rnd.randint(2, 20)))}",'
            f'"id":"{rnd.getrandbits(64):016x}"}}\n'
        )
        parts.append(line)
        total += len(line)
        i += 1
    return "".join(parts).encode()[:size]
