"""A `path:` hook outside its case directory but inside the workspace validates; one leading out of the workspace (by
`..` or a symlink) is refused by `claw validate`, before a build sends anything.

The config schema says a hook's `path` is relative to test.yaml, and allows `../../shared/check.py` (one hook file
shared by many cases). Early in session 75 (commit 2487af18) `claw validate` refused such a hook, because the hook ran
confined to its case directory, where the file does not exist (before that, every such check ended `error` after the
build had paid for its runs). Later in session 75 the hook's sandbox gained the hook file's folder (evaluate/hooks.py,
docs/evaluation.md, What a hook may read), so the refusal was dropped but where the hook truly cannot run: outside the
workspace, as before. The build of such a hook: tests/builder/test_hook_path_shared.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.claw import Claw
from tests.support.workspace import Workspace

HOOK = "def check(artifact):\n    return True\n"
FIELD = "configs/cases/alpha/test.yaml: deterministic_checks[0].python_hook.path: "


def _hook_at(ws: Workspace, path: str) -> None:
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "hook", "python_hook": {"path": path, "callable_name": "check"}}]))


def _validates(claw: Claw) -> None:
    code, out, err = claw("validate")
    assert code == 0, out + err


def test_a_hook_beside_the_cases_validates(ws: Workspace, claw: Claw) -> None:
    (ws.configs / "shared").mkdir()
    (ws.configs / "shared" / "check.py").write_text(HOOK)
    _hook_at(ws, "../../shared/check.py")
    _validates(claw)


def test_a_hook_through_a_symlink_leading_out_of_the_case_validates(ws: Workspace, claw: Claw) -> None:
    (ws.configs / "shared").mkdir()
    (ws.configs / "shared" / "check.py").write_text(HOOK)
    os.symlink("../../shared", ws.configs / "cases" / "alpha" / "hooks")
    _hook_at(ws, "hooks/check.py")
    _validates(claw)


def test_a_hook_through_a_symlink_inside_the_case_validates(ws: Workspace, claw: Claw) -> None:
    (ws.configs / "cases" / "alpha" / "lib").mkdir()
    (ws.configs / "cases" / "alpha" / "lib" / "check.py").write_text(HOOK)
    os.symlink("lib", ws.configs / "cases" / "alpha" / "hooks")
    _hook_at(ws, "hooks/check.py")
    _validates(claw)


def test_a_hook_outside_the_workspace_is_refused(ws: Workspace, claw: Claw, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "check.py").write_text(HOOK)
    written = os.path.relpath(outside / "check.py", ws.configs / "cases" / "alpha")
    _hook_at(ws, written)
    assert claw.one_config_error() == FIELD + (
        f"{written} resolves to {os.path.realpath(outside / 'check.py')}, outside the workspace (a path a config names "
        "must stay inside the workspace, after following symlinks)")


def test_a_hook_through_a_symlink_leading_out_of_the_workspace_is_refused(
        ws: Workspace, claw: Claw, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "check.py").write_text(HOOK)
    os.symlink(outside, ws.configs / "cases" / "alpha" / "hooks")
    _hook_at(ws, "hooks/check.py")
    assert claw.one_config_error() == FIELD + (
        f"hooks/check.py resolves to {os.path.realpath(outside / 'check.py')}, outside the workspace (a path a config "
        "names must stay inside the workspace, after following symlinks)")
