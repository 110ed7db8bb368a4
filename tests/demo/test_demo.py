"""`claw demo` from a built (non-editable) copy of the package: no key, no network, under a minute."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _built_package(dest: Path) -> Path:
    """What an install puts on sys.path: setuptools' build of the package, package data included."""
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import setup; "
                    f"sys.argv = ['setup.py', '-q', 'build', '--build-base', {str(dest)!r}]; setup()"],
                   cwd=REPO, check=True, capture_output=True)
    lib = dest / "lib"
    assert (lib / "clawstore" / "demo" / "configs" / "suites" / "llm_probe_smoke.yaml").is_file()
    return lib


def test_demo_runs_from_an_installed_package_without_key_or_network(tmp_path: Path) -> None:
    lib = _built_package(tmp_path / "build")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENROUTER_", "CLAW_"))}
    env.update(PYTHONPATH=str(lib), HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               NO_PROXY="127.0.0.1")  # any request leaving loopback would fail
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", "demo", "--dir", str(tmp_path / "ws")],
                          cwd=outside, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert str(lib) in subprocess.run([sys.executable, "-c", "import clawstore; print(clawstore.__file__)"],
                                      cwd=outside, env=env, capture_output=True, text=True).stdout
    assert "SIMULATED" in out
    builds = [line for line in out.splitlines() if line.startswith("# simulated provider requests")]
    assert [line.split(": ")[1].split(" ")[0] for line in builds] == ["24", "0", "8"]
    assert "input.messages[1].content 'What is 17 * 23?' -> 'What is 17 * 24?'" in out
    assert "Case Results" in out and "Model Summary" in out
    assert "gpt4o_mini  arithmetic_plain" in out.split("$ claw query")[1]
    assert list(outside.iterdir()) == []  # nothing written where the user stood
    # The promise is "under a minute"; the margin absorbs a loaded 2-core test machine.
    assert elapsed < 90, f"claw demo took {elapsed:.1f}s"
