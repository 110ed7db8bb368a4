"""A claw command whose stdout reader leaves (`claw explain … | head -1`) ends quietly, as `git log | head` does."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.workspace import Workspace


def _with_stdout_closed(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    """`claw ARGS` writing into a pipe whose reader is gone (the reader end closed before it starts)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=ws.root, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


def test_a_reader_that_left_is_not_an_error(ws: Workspace) -> None:
    # It was "claw: error: Broken pipe", exit 3 (the store's error), after `claw explain … | head -1`.
    done = _with_stdout_closed(ws, "explain", "--suite", "main", "--run-profile", "rp")
    assert (done.returncode, done.stderr.count("error")) == (141, 0), done.stderr
    assert "never been built" in done.stderr  # (its note on stderr still said)


_A_COMMAND_WHOSE_SOCKET_BREAKS = """
from clawstore.cli import main
@main.command("epipe")
def epipe() -> None:
    raise BrokenPipeError(32, "Broken pipe")
main()
"""


def test_a_broken_pipe_elsewhere_is_still_an_error(ws: Workspace) -> None:
    # stdout read to the end: a provider's reset socket (EPIPE too) must not pass as a reader that left.
    done = subprocess.run([sys.executable, "-c", _A_COMMAND_WHOSE_SOCKET_BREAKS, "epipe"], cwd=ws.root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and done.stderr == "claw: error: Broken pipe\n", done.stderr


def test_help_and_version_into_a_reader_that_left_end_as_any_command(ws: Workspace) -> None:
    # `claw --help | head -1`: written while click parses the arguments, before any command: it ended with exit 1
    for args in (("--help",), ("--version",), ("build", "--help")):
        done = _with_stdout_closed(ws, *args)
        assert (done.returncode, done.stderr) == (141, ""), (args, done.stderr)
