"""A `path:` hook outside its case directory is refused by `claw validate` (and so before a build sends anything): the
hook runs confined to its case directory (docs/evaluation.md, What a hook may read), where that file does not exist.
Before session 75 validation asked only that it stay inside the workspace: the build ran and paid for every run, then
every such check ended `error` ("hook raised FileNotFoundError" for a file that is there).
"""

from __future__ import annotations

import os

from tests.support.claw import Claw
from tests.support.workspace import Workspace

HOOK = "def check(artifact):\n    return True\n"
FIELD = "configs/cases/alpha/test.yaml: deterministic_checks[0].python_hook.path: "


def _hook_at(ws: Workspace, path: str) -> None:
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "hook", "python_hook": {"path": path, "callable_name": "check"}}]))


def test_a_hook_beside_the_cases_is_refused(ws: Workspace, claw: Claw) -> None:
    (ws.configs / "shared").mkdir()
    (ws.configs / "shared" / "check.py").write_text(HOOK)
    _hook_at(ws, "../../shared/check.py")
    assert claw.one_config_error() == (
        FIELD + "../../shared/check.py is outside the case directory, which is all a hook can read where it runs "
        "(keep it there, or share it as an import_path package)")


def test_a_hook_through_a_symlink_leading_out_of_the_case_is_refused(ws: Workspace, claw: Claw) -> None:
    (ws.configs / "shared").mkdir()
    (ws.configs / "shared" / "check.py").write_text(HOOK)
    os.symlink("../../shared", ws.configs / "cases" / "alpha" / "hooks")
    _hook_at(ws, "hooks/check.py")
    assert claw.one_config_error().startswith(FIELD + "hooks/check.py is outside the case directory")


def test_a_hook_through_a_symlink_inside_the_case_validates(ws: Workspace, claw: Claw) -> None:
    (ws.configs / "cases" / "alpha" / "lib").mkdir()
    (ws.configs / "cases" / "alpha" / "lib" / "check.py").write_text(HOOK)
    os.symlink("lib", ws.configs / "cases" / "alpha" / "hooks")
    _hook_at(ws, "hooks/check.py")
    code, out, err = claw("validate")
    assert code == 0, out + err
