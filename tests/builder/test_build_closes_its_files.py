"""An in-process `claw build` (a notebook, a program embedding claw, this suite's CliRunner) lets go of the files it
opened when it returns, not when the garbage collector next runs: a build's rows are kept in anonymous temporary
files (builder/rows.py), and the report holding them sits in reference cycles, so before session 81 they stayed open
until a full collection (every in-process build of the suite paid one: tests/conftest.py's descriptor guard)."""

from __future__ import annotations

import gc

from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.descriptors import open_descriptors
from tests.support.workspace import Workspace


def test_a_builds_rows_files_are_closed_when_it_returns(claw: Claw, ws: Workspace) -> None:  # noqa: F811
    before = open_descriptors()
    gc.collect()
    gc.disable()  # (what only a collection would close stays open: the test sees it)
    try:
        code, out, err = claw.build()
        now = open_descriptors()
    finally:
        gc.enable()
    assert code == 0, out + err
    assert out.count("alpha") == out.count("beta") == 2, out  # (its rows, read from those files: 2 cases x 2 models)
    left = {fd: what for fd, what in now.items() if before.get(fd) != what and "(deleted)" in what}
    assert not left, f"the build left its temporary files open: {left}"
