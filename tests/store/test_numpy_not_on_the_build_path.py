"""numpy is gc's and fsck's (arrays over a whole store), never a build's: imported by a module a build loads, it cost
every `claw build` ~12 MB of RSS and ~50 ms, its no-op too (session 58: `gc_kept` imported it at the top, and a build
imports gc's module for its lease names: side_by_side's no-op RSS 35.6 -> 48.1 MB)."""

from __future__ import annotations

import subprocess
import sys

BUILD_PATH = ("clawstore.cli", "clawstore.project.front", "clawstore.builder", "clawstore.store",
              "clawstore.store.services.gc", "clawstore.store.reach", "clawstore.query.manifest")


def test_the_modules_a_build_loads_do_not_import_numpy() -> None:
    code = ("import importlib, sys\n"
            f"for name in {BUILD_PATH!r}:\n"
            "    importlib.import_module(name)\n"
            "    assert 'numpy' not in sys.modules, name\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
