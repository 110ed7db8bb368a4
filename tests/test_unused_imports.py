"""The `claw` program leaves out imports it never needs (clawstore/cli/unused_imports.py): a build
imports neither trio nor httpx's command-line client, and still builds; a program that imports claw
as a library keeps them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from clawstore.testing.standin import StandIn
from tests.support.workspace import SECRET, standard

# What importing trio and httpx._main would bring (the blocked names themselves are listed by
# -X importtime too, as imports tried and refused).
BROUGHT = ("trio._core", "rich.syntax", "pygments")


def imported(importtime_log: str) -> set[str]:
    """The modules a `python -X importtime` run imported, from its stderr."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime_log.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_a_build_imports_neither_trio_nor_httpx_command_line(standin: StandIn, tmp_path: Path) -> None:
    # Installed here (selenium brings trio, rich brings pygments), else the test could not fail.
    assert all(importlib.util.find_spec(name) is not None for name in ("trio", "pygments"))
    ws = standard(tmp_path / "ws")
    standin.set_default({"content": "4"})
    env = {**os.environ, "OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
           "CLAW_STORE": str(tmp_path / "store")}
    built = subprocess.run([sys.executable, "-X", "importtime", "-m", "clawstore.cli", "build", "--suite", "main",
                            "--run-profile", "rp"], cwd=ws.root, env=env, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr[-3000:]
    modules = imported(built.stderr)
    assert {"httpx", "httpcore"} <= modules  # the build did load its provider client
    assert not modules & set(BROUGHT)
    assert len(standin.requests) == 4


def test_a_program_that_imports_claw_keeps_those_imports() -> None:
    code = ("import clawstore.cli, clawstore.providers.client, trio, httpx._main, pydantic.plugin._loader as loader\n"
            "print(trio.__name__, httpx._main.__name__, loader.__file__.endswith('_loader.py'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["trio", "httpx._main", "True"]  # (pydantic's own plugin loader, too)
