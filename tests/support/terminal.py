"""A real terminal for tests: a detached tmux session on a private server, read with capture-pane."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


class Terminal:
    """`claw` (or any command) running in a tmux pane of a fixed size; `screen()` is what it shows."""

    def __init__(self, socket: str, width: int = 110, height: int = 30):
        self.socket, self.width, self.height = socket, width, height
        self.session = "claw"

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True,
                              text=True).stdout

    def start(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # The pane stays after the command ends so its last screen can be read.
        shell = f"cd {shlex.quote(str(cwd))} && env {exports} {shlex.join(command)}; echo EXIT=$?; sleep 600"
        self._tmux("new-session", "-d", "-s", self.session, "-x", str(self.width), "-y", str(self.height),
                   "bash", "--norc", "-c", shell)

    def screen(self, ansi: bool = False, history: bool = False) -> str:
        """What the pane shows (with `history`, also what scrolled off the top)."""
        return self._tmux("capture-pane", "-p", *(["-e"] if ansi else []), *(["-S", "-"] if history else []),
                          "-t", self.session)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.session, *keys)

    def wait_for(self, found: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if found(shown):
                return shown
            time.sleep(0.1)
        raise AssertionError(f"the terminal never showed what was expected; it shows:\n{shown}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it)")
    term = Terminal(f"claw-test-{os.getpid()}-{time.monotonic_ns()}")
    try:
        yield term
    finally:
        term.close()
