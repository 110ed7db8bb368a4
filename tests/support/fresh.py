"""A test's body run in a new interpreter: for what a test worker's leftovers would falsify — threads earlier tests
left running (fsck forks its helper only where no other thread runs; tracemalloc counts every thread's allocations)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_SCRIPT = ("import importlib, sys, pytest\nfrom pathlib import Path\nmodule = importlib.import_module(sys.argv[1])\n"
           "with pytest.MonkeyPatch.context() as patch:\n"
           "    getattr(module, sys.argv[2])(Path(sys.argv[3]), patch)\n")


def in_fresh_process(module: str, body: str, tmp_path: Path, timeout: float = 120) -> None:
    """Run `module.body(tmp_path, monkeypatch)` in a new interpreter; its failure (output included) fails the test."""
    done = subprocess.run([sys.executable, "-c", _SCRIPT, module, body, str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr


def fresh_json(module: str, function: str, argument: str, timeout: float = 300) -> Any:
    """`module.function(argument)` run in a new interpreter, what it returns as JSON: for what a process holds
    (its max RSS), which a test worker's own history would falsify."""
    script = f"import json, sys; from {module} import {function}; print(json.dumps({function}(sys.argv[1])))"
    done = subprocess.run([sys.executable, "-c", script, argument], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
