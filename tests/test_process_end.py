"""The end of a `claw` process (clawstore/host/process_end.py), in real child processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, sys
from pathlib import Path
from clawstore.host import process_end

out = Path(sys.argv[1])
process_end.at_exit(lambda: (out / "claw-work").write_text("done"))
atexit.register(lambda: (out / "other-teardown").write_text("ran"))
if sys.argv[2] == "program":
    process_end.claim_program()
print("left to exit:", process_end.leave_to_exit(), end="")  # buffered: must still be flushed
process_end.finish(int(sys.argv[3]))
sys.exit(int(sys.argv[3]))
"""


def run(tmp_path: Path, mode: str, code: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), mode, str(code)],
                          capture_output=True, text=True, timeout=60)


def test_the_claw_program_ends_at_once_after_its_own_exit_work(tmp_path: Path) -> None:
    done = run(tmp_path, "program", 3)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "left to exit: True"
    assert (tmp_path / "claw-work").read_text() == "done"  # claw's own exit work (sealing the pack) ran
    assert not (tmp_path / "other-teardown").exists()  # teardown left to the end (Ray's) was skipped


def test_a_program_that_imports_claw_ends_as_usual(tmp_path: Path) -> None:
    done = run(tmp_path, "library", 4)
    assert done.returncode == 4, done.stderr
    assert done.stdout == "left to exit: False"
    assert (tmp_path / "claw-work").read_text() == "done"
    assert (tmp_path / "other-teardown").read_text() == "ran"
