"""A case is `configs/cases/<case>/test.yaml` or `configs/cases/<group>/<case>/test.yaml` (the config reference). A
case file claw does not read there (`test.yml`, or a test.yaml one folder deeper) is named in a warning by `claw
validate`: before session 72 it was passed over without a word, `OK` counted one case fewer, and a suite selecting
by tag ran without it."""

from __future__ import annotations

import shutil

from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _warnings(claw: Claw) -> tuple[int, list[str]]:
    code, out, err = claw("validate")
    return code, [line for line in (out + err).splitlines() if line.startswith("warning:")]


def test_case_files_out_of_the_layout_are_named(ws: Workspace, claw: Claw) -> None:
    cases = ws.configs / "cases"
    (cases / "beta/test.yaml").rename(cases / "beta/test.yml")
    (cases / "group/deeper/gamma").mkdir(parents=True)
    shutil.copy(cases / "alpha/test.yaml", cases / "group/deeper/gamma/test.yaml")
    (cases / "group2/delta").mkdir(parents=True)
    (cases / "alpha/test.yaml").replace(cases / "group2/delta/test.yml")
    code, lines = _warnings(claw)
    assert code == 0
    assert sorted(lines) == [
        "warning: configs/cases/beta/test.yml: not read: a case is configs/cases/<case>/test.yaml or "
        "configs/cases/<group>/<case>/test.yaml (name it test.yaml)",
        "warning: configs/cases/group/deeper/gamma/test.yaml: not read: a case is configs/cases/<case>/test.yaml or "
        "configs/cases/<group>/<case>/test.yaml (one folder too deep)",
        "warning: configs/cases/group2/delta/test.yml: not read: a case is configs/cases/<case>/test.yaml or "
        "configs/cases/<group>/<case>/test.yaml (name it test.yaml)",
    ], lines


def test_files_inside_a_case_are_its_own(ws: Workspace, claw: Claw) -> None:
    """A case's own folders (messages/, hooks/, fixtures) are not searched: a test.yaml or test.yml there is data."""
    (ws.configs / "cases/alpha/fixtures/inner").mkdir(parents=True)
    (ws.configs / "cases/alpha/fixtures/inner/test.yaml").write_text("not: a case\n", encoding="utf-8")
    (ws.configs / "cases/alpha/fixtures/test.yml").write_text("not: a case\n", encoding="utf-8")
    code, lines = _warnings(claw)
    assert code == 0 and lines == []
