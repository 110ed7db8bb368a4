"""Shared helpers for the store tests: running `claw` and small scripts as real processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent
CLAW = [sys.executable, "-m", "clawstore.cli"]


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


_WORDS = ["assistant", "tool_call", "content", "tokens", "latency", "model", "case", "message"]
_PAIRS = [f"{first} {second}" for first in _WORDS for second in _WORDS]  # (8 * first + second)


def json_like(size: int, seed: int = 0) -> bytes:
    """Deterministic JSON-lines bytes: compressible like real run artifacts (zstd level 1: ~0.23). A line's choices
    (its event type, its 2-20 words, its id) are the bits of one draw, its words taken two at a time: a 9 MiB one in
    0.3 s of CPU, not 0.55 (a draw a word: tests/store/test_migrate.py makes six)."""
    rnd = random.Random(seed)
    draw, value = rnd.getrandbits, rnd.random
    parts, total, i = [], 0, 0
    while total < size:
        noise = draw(192)
        count = 2 + noise % 19  # words in the text
        words = noise >> 5
        text = " ".join([_PAIRS[(words >> (6 * k)) & 63] for k in range(count // 2)])
        if count & 1:
            text += " " + _WORDS[(words >> 60) & 7]
        line = (f'{{"sequence":{i},"event_type":"{_WORDS[(noise >> 68) & 7]}","value":{value()!r},'
                f'"text":"{text}","id":"{noise >> 128:016x}"}}\n')
        parts.append(line)
        total += len(line)
        i += 1
    return "".join(parts).encode()[:size]
