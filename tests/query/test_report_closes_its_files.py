"""An in-process `claw report` lets go of the files it opened when it returns, its rows shown or a filter refused, not
when the garbage collector next runs (before session 81 a refused filter left the spilled JSON rows' file to it)."""

from __future__ import annotations

import pytest

from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.descriptors import opened_by
from tests.support.workspace import Workspace

REPORT = ("report", "--suite", "main", "--run-profile", "rp", "--no-chart")


@pytest.mark.parametrize(("extra", "code"), [(("--output", "json"), 0), (("--output", "text"), 0),
                                             (("--output", "json", "--case", "nope"), 2)])
def test_a_report_closes_the_files_it_opened(claw: Claw, ws: Workspace, extra: tuple[str, ...],  # noqa: F811
                                             code: int) -> None:
    built, out, err = claw.build()
    assert built == 0, out + err
    (exit_code, out, err), left = opened_by(lambda: claw(*REPORT, *extra))
    assert exit_code == code, out + err
    assert ("alpha" in out) == (code == 0), out + err  # (its rows shown; a filter matching nothing refused)
    assert not left, f"the report left files open: {left}"
