"""An in-process `claw build` (a notebook, a program embedding claw, this suite's CliRunner) lets go of the files it
opened when it returns, not when the garbage collector next runs: a build's rows are kept in anonymous temporary
files (builder/rows.py), and the report holding them sits in reference cycles, so before session 81 they stayed open
until a full collection (every in-process build of the suite paid one: tests/conftest.py's descriptor guard)."""

from __future__ import annotations

from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.descriptors import opened_by
from tests.support.workspace import Workspace


def test_a_builds_rows_files_are_closed_when_it_returns(claw: Claw, ws: Workspace) -> None:  # noqa: F811
    (code, out, err), opened = opened_by(claw.build)
    assert code == 0, out + err
    assert out.count("alpha") == out.count("beta") == 2, out  # (its rows, read from those files: 2 cases x 2 models)
    left = {fd: what for fd, what in opened.items() if "(deleted)" in what}
    assert not left, f"the build left its temporary files open: {left}"
