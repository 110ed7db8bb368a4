"""click's own usage errors (an unknown option, a missing argument, a bad choice or number, an unknown command): one
line on stderr naming the command, what was expected and where to look, exit 2, as every other bad input. They were
click's four lines (`Usage: …`, `Try '… --help' for help.`, a blank line, `Error: …`) until session 73."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main

CASES = [
    (("build", "--nope"),
     "claw build: no such option '--nope'; did you mean one of: '--force', '--model', '--store'? "
     "(claw build --help lists them)"),
    (("archive", "import"), "claw archive import: missing argument 'FILE' (claw archive import --help)"),
    (("build", "--progress", "nope"),
     "claw build: invalid value for '--progress': 'nope' is not one of 'auto', 'live', 'plain', 'json', 'none' "
     "(claw build --help)"),
    (("build", "--max-concurrency", "x"),
     "claw build: invalid value for '--max-concurrency': 'x' is not a valid integer range (claw build --help)"),
    (("bild",), "claw: no such command 'bild'; did you mean 'build'? (claw --help lists them)"),
    (("--nope",), "claw: no such option '--nope' (claw --help lists them)"),
    (("archive", "nope"), "claw archive: no such command 'nope' (claw archive --help lists them)"),
    (("cat",), "claw cat: missing argument 'ID' (claw cat --help)"),
    (("put", "--store"), "claw put: option '--store' requires an argument (claw put --help)"),
    (("archive", "import", "--store"),
     "claw archive import: option '--store' requires an argument (claw archive import --help)"),
    (("build", "--suite", "s", "--run-profile", "r", "x"),
     "claw build: got unexpected extra argument (x) (claw build --help)"),
]


@pytest.mark.parametrize(("args", "line"), CASES, ids=[" ".join(args) for args, _ in CASES])
def test_a_usage_error_is_one_line_naming_the_command(args: tuple[str, ...], line: str) -> None:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", line + "\n")


def test_the_program_says_it_in_one_line_too(tmp_path: Path) -> None:
    # (`python -m clawstore.cli`: the program's name in click's lines was `python -m clawstore.cli`, not claw)
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "build", "--nope"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "claw build: no such option '--nope'; did you mean one of: '--force', '--model', " \
                          "'--store'? (claw build --help lists them)\n"


def test_help_and_a_group_without_its_command_still_show_the_help() -> None:
    runner = CliRunner()
    helped = runner.invoke(main, ["build", "--help"])
    assert helped.exit_code == 0 and helped.stdout.startswith("Usage: ") and "--progress" in helped.stdout
    bare = runner.invoke(main, ["archive"])  # (click's help for a group given no command: as it was, exit 2)
    assert bare.exit_code == 2 and bare.stderr.startswith("Usage: ") and "Commands:" in bare.stderr
