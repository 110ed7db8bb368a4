"""tests/support/reaped.py: what a test started is gone when its block ends, whether the test passed or failed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.benchrun import REPO
from tests.support.reaped import descendants, reaped

# A parent that starts a child sleeping as long as a lease holder does, says both pids, then sleeps too.
PARENT = ("import subprocess, sys, time\n"
          "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
          "print(child.pid, flush=True)\n"
          "time.sleep(600)\n")


def _gone(pid: int) -> bool:
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def _ended_soon(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _gone(pid)


@pytest.mark.parametrize("session", [False, True], ids=["in-the-tests-group", "own-session"])
def test_a_failing_block_ends_the_process_and_its_child(session: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                            start_new_session=session)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert descendants(proc.pid) == [child]
    with pytest.raises(AssertionError, match="the test failed here"), reaped(proc):
        raise AssertionError("the test failed here")
    assert proc.returncode is not None and proc.stdout.closed
    assert _ended_soon(child)


def test_processes_handed_in_the_block_are_ended_and_one_that_ended_is_left_as_it_was() -> None:
    with pytest.raises(AssertionError), reaped() as started:
        done = started(subprocess.Popen([sys.executable, "-c", "print('said')"], stdout=subprocess.PIPE, text=True))
        done.wait(timeout=30)
        sleepers = [started(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
                    for _ in range(2)]
        raise AssertionError
    assert all(s.returncode is not None for s in sleepers)
    assert done.returncode == 0 and done.stdout is not None and done.stdout.read() == "said\n"  # (still the test's)
    done.stdout.close()


FAILS_WITH_A_SLEEPER = """
import subprocess, sys

def test_it(reap):
    proc = reap(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
    open({pid_file!r}, "w").write(str(proc.pid))
    assert False, "the test failed before stopping it"
"""


def test_the_fixture_ends_what_a_failed_test_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    (tmp_path / "test_failing.py").write_text(FAILS_WITH_A_SLEEPER.format(pid_file=str(pid_file)))
    (tmp_path / "conftest.py").write_text("from tests.support.reaped import reap  # noqa: F401\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                           str(tmp_path / "test_failing.py")], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "the test failed before stopping it" in done.stdout, done.stdout + done.stderr
    assert _ended_soon(int(pid_file.read_text()))
