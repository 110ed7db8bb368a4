"""An output path that names something other than a regular file (a named pipe, a device, a symlink) is refused,
never replaced: the page, the archive and the query's export are written beside and renamed into place, and the
rename replaced whatever was there (`claw archive export -o /dev/full` run as root replaced the device with a file)."""

from __future__ import annotations

import os
from pathlib import Path

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

RUNS = ("--suite", "main", "--run-profile", "rp")
WRITERS = {  # command -> its arguments, OUT where the output path goes
    "view": ("view", *RUNS, "--out", "OUT"),
    "archive export": ("archive", "export", *RUNS, "-o", "OUT"),
    "query --out": ("query", "select 1 as one", "--out", "OUT"),
}


def _targets(tmp: Path) -> dict[str, Path]:
    pipe = tmp / "pipe.csv"
    os.mkfifo(pipe)
    kept = tmp / "kept.csv"
    kept.write_text("kept\n")
    link = tmp / "link.csv"
    link.symlink_to(kept)
    return {"a named pipe": pipe, "a symlink": link}


def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_was(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> None:  # noqa: F811
    assert claw.build()[0] == 0
    targets = _targets(tmp_path)
    for command, args in WRITERS.items():
        for what, target in targets.items():
            code, out, err = claw(*(str(target) if a == "OUT" else a for a in args))
            assert code == 2 and err.count("\n") == 1 and "not a regular file" in err and str(target) in err, (
                command, what, code, out, err)
            assert not (tmp_path / f"{target.name}.d").exists(), (command, what)  # (view's details folder)
    assert (tmp_path / "pipe.csv").is_fifo()
    assert (tmp_path / "link.csv").is_symlink() and (tmp_path / "kept.csv").read_text() == "kept\n"
    # A regular file is replaced, as before.
    (tmp_path / "plain.csv").write_text("old\n")
    code, _, err = claw("query", "select 1 as one", "--out", str(tmp_path / "plain.csv"))
    assert code == 0 and (tmp_path / "plain.csv").read_text() != "old\n", err

