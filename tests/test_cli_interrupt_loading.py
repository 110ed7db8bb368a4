"""Ctrl-C while `claw` loads its modules (0.2-0.3 s, over a second on a loaded machine) is one line and exit 130."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The program as its console script starts it, with an import hook that sends it SIGINT as click starts loading:
# after the guard, in the middle of the imports an interrupt used to leave as a traceback.
INTERRUPTED_WHILE_LOADING = textwrap.dedent("""
    import os, signal, sys

    class Interrupt:
        def find_spec(self, name, path=None, target=None):
            if name == "click":
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, Interrupt())
    from clawstore.cli import entry
    entry()
""")


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60,
                          cwd=REPO)


def test_ctrl_c_while_loading_is_one_line_and_130() -> None:
    done = _python(INTERRUPTED_WHILE_LOADING, "--version")
    assert (done.returncode, done.stderr, done.stdout) == (130, "claw: interrupted\n", "")


def test_once_loaded_ctrl_c_is_pythons_again() -> None:
    # (each command turns KeyboardInterrupt into its own line: a build says what it committed)
    done = _python("import signal, clawstore.cli; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    assert done.stdout == "True\n", done.stderr
