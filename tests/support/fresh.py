"""A test's body run in a new interpreter: for what a test worker's leftovers would falsify — threads earlier tests
left running (fsck forks its helper only where no other thread runs; tracemalloc counts every thread's allocations)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_SCRIPT = ("import importlib, sys, pytest\nfrom pathlib import Path\nmodule = importlib.import_module(sys.argv[1])\n"
           "with pytest.MonkeyPatch.context() as patch:\n"
           "    getattr(module, sys.argv[2])(Path(sys.argv[3]), patch, *sys.argv[4:])\n")


def in_fresh_process(module: str, body: str, tmp_path: Path, *args: str, timeout: float = 120) -> None:
    """Run `module.body(tmp_path, monkeypatch, *args)` in a new interpreter; its failure (output included) fails the
    test."""
    done = subprocess.run([sys.executable, "-c", _SCRIPT, module, body, str(tmp_path), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr


_MEASURE = ("import importlib, json, sys\nmodule = importlib.import_module(sys.argv[1])\n"
            "print(json.dumps(getattr(module, sys.argv[2])(*sys.argv[3:])))\n")


def measured_in_fresh_process(function: Callable[..., Any], *args: object, timeout: float = 300) -> Any:
    """`function(*args)` (a module-level function of a test module; each argument passed as its str) called in a new
    interpreter: what it returns, through JSON. For a measurement the test then bounds."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, function.__module__, function.__name__, *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)
