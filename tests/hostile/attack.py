"""Running an attack: a real `claw` process on a real file, and what must hold after it."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawstore.store import Store

CLAW = str(Path(sys.executable).with_name("claw"))
MEMORY_CAP = 2 * 1024**3  # an attack that needs more address space than this has already won


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def refused_cleanly(self) -> bool:
        """Exit 2, one line on stderr, no traceback."""
        lines = self.stderr.strip().splitlines()
        return self.code == 2 and len(lines) == 1 and "Traceback" not in self.stderr + self.stdout


# util-linux's prlimit sets the cap (soft and hard) and execs claw: the limit a preexec_fn's setrlimit set, without
# the preexec_fn, which makes subprocess fork the whole worker instead of spawning by vfork (its page tables copied,
# then copy-on-write faults: ~38 ms of CPU a spawn from a 340 MB process, against ~1 ms; a worker grows that big).
PRLIMIT = shutil.which("prlimit")


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def capped(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """`argv` run under the memory cap: the command and the extra arguments to give subprocess."""
    if PRLIMIT is None:
        return argv, {"preexec_fn": _cap_memory}
    return [PRLIMIT, f"--as={MEMORY_CAP}", "--", *argv], {}


def run_claw(cwd: Path, *args: str, timeout: float = 120) -> Outcome:
    """`claw ARGS` as a child process (environment inherited), memory-capped, with a deadline."""
    argv, cap = capped([CLAW, *args])
    done = subprocess.run(argv, cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=timeout,
                          **cap)
    return Outcome(done.returncode, done.stdout, done.stderr)



def forge_run_record(store_dir: Path, forge: Callable[[dict[str, Any]], bytes]) -> str:
    """A build log beside the first one, whose first run names a forged record: `forge` changes that
    run's record and gives the bytes to store (as a hostile store's, or an older claw's, would be).
    Returns the forged record's id."""
    store = Store(store_dir)
    first = sorted((store_dir / "builds").glob("*.json"))[0]
    log = json.loads(first.read_text())
    node = next(n for n in log["nodes"] if n["kind"] == "run")
    node["record"] = forged = str(store.put_bytes(forge(store.get_json(node["record"]))))
    log["build_id"] = log["build_id"][:-4] + "beef"
    (first.parent / f"{log['build_id']}.json").write_text(json.dumps(log))
    return forged
