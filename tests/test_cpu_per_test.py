"""tests/support/cpu_per_test.py writes a row a test: its worker's own CPU and its child processes' apart."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = '''
import subprocess, sys, time

def test_spins_here():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass

def test_spins_in_a_child():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\n"
                    "while time.process_time() < end: pass"], check=True)
'''


def test_each_tests_own_and_childrens_cpu_are_rows(tmp_path: Path) -> None:
    (tmp_path / "test_spin.py").write_text(TESTS)
    out = tmp_path / "rows"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-p",
                           "tests.support.cpu_per_test", str(tmp_path / "test_spin.py")], cwd=tmp_path,
                          env={**os.environ, "CPU_PER_TEST_DIR": str(out), "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {line.split("\t")[0].rsplit("::", 1)[1]: [float(v) for v in line.split("\t")[1:]]
            for file in out.iterdir() for line in file.read_text().splitlines()}
    here, child = rows["test_spins_here"], rows["test_spins_in_a_child"]
    assert here[1] >= 0.29 and here[2] < 0.05
    assert child[2] >= 0.29 and child[1] < 0.2
    assert all(wall >= own for wall, own, _, _ in (here, child))
    assert abs(here[3] - time.time()) < 120 and child[3] >= here[3] + here[0] - 0.1  # started in the order they ran
