"""A Ctrl-C'd `claw` ends with exit 130 (or its own code, the Ctrl-C coming as the interpreter tears itself down),
never by SIGINT itself (status -2, which a script's `subprocess` sees and a shell cannot tell from 130): once claw said
`claw: interrupted`, and once the command's output is written (real processes, real signals)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# A command whose work runs code through PyRun_String (as a C extension may), Ctrl-C arriving in it: CPython counts
# that KeyboardInterrupt unhandled (a flag that stays set) and, run as `python -m`, killed itself with SIGINT at its
# end, after claw had caught the interrupt and said so.
INTERRUPTED_IN_RUN_CODE = textwrap.dedent("""
    import ctypes
    from clawstore.cli import entry, main

    @main.command("probe")
    def probe() -> None:
        run = ctypes.pythonapi.PyRun_String
        run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]
        run.restype = ctypes.py_object
        run(b"raise KeyboardInterrupt", 257, {}, {})  # (257: Py_file_input)

    entry()
""")

# The program, a Ctrl-C arriving as the interpreter tears down its modules (after claw's output and exit work).
INTERRUPTED_IN_TEARDOWN = textwrap.dedent("""
    import os, signal, time

    class Late:
        def __del__(self):  # (run as the interpreter tears down __main__)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)

    late = Late()
    from clawstore.cli import entry
    entry()
""")


def _env(*path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (REPO, *path))}


def test_claw_interrupted_is_130_even_when_cpython_counted_the_interrupt_unhandled(tmp_path: Path) -> None:
    (tmp_path / "probe_program.py").write_text(INTERRUPTED_IN_RUN_CODE)
    done = subprocess.run([sys.executable, "-m", "probe_program", "probe"], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stderr) == (130, "claw: interrupted\n"), done


def test_ctrl_c_as_the_interpreter_tears_down_is_not_the_end_by_sigint(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_IN_TEARDOWN, "--version"], capture_output=True,
                          text=True, env=_env(), cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stdout) == (0, "claw, version 0.1.0\n"), done


def test_ctrl_c_at_random_moments_of_the_end_is_never_the_end_by_sigint(tmp_path: Path) -> None:
    # The moment the output arrives is the interpreter's flush of it, just before its teardown: a Ctrl-C then, or a
    # few milliseconds later, ended 15 of 16 processes by SIGINT before session 73.
    outcomes = []
    for _ in range(10):
        child = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "--version"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
        assert child.stdout is not None
        line = child.stdout.readline()
        time.sleep(random.uniform(0, 0.003))
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        outcomes.append((child.returncode, err))
        assert line + out == "claw, version 0.1.0\n"
    assert all(code == 0 and err == "" or (code, err) == (130, "claw: interrupted\n") for code, err in outcomes), \
        outcomes
