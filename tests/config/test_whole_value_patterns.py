"""A value held to a pattern matches it whole: Python's `$` also matches before a final newline, so before session 72
a `model_overrides` key "m1\\n" (an override no model gets, where an invalid model_id is an error) and a hook's
`callable_name: "check\\n"` (no function of that name) validated. A hook's callable and module path are Python
identifiers as Python reads them: `prüfe` was refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _errors(claw: Claw) -> tuple[int, list[str]]:
    code, out, err = claw("validate")
    assert "Traceback" not in out + err
    return code, [line for line in (out + err).splitlines() if line.startswith("configs/")]


def test_a_model_overrides_key_with_a_line_end_is_refused(ws: Workspace, claw: Claw) -> None:
    ws.edit("run_profiles/rp.yaml", lambda doc: doc.update({"model_overrides": {"m1\n": {"temperature": 1}}}))
    code, lines = _errors(claw)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("configs/run_profiles/rp.yaml: model_overrides.m1"), lines
    assert "not a valid model_id" in lines[0], lines


def _hook(ws: Workspace, hook: dict[str, Any]) -> None:
    ws.edit("cases/alpha/test.yaml", lambda doc: doc.update({"deterministic_checks": [
        {"check_id": "hook", "python_hook": hook}]}))


@pytest.mark.parametrize(("hook", "field"), [
    ({"import_path": "json.decoder", "callable_name": "JSONDecoder\n"}, "callable_name"),
    ({"import_path": "json..decoder", "callable_name": "JSONDecoder"}, "import_path"),
    ({"import_path": "json.decoder", "callable_name": "1st"}, "callable_name"),
])
def test_a_hook_name_with_a_line_end_is_refused(ws: Workspace, claw: Claw, hook: dict[str, Any], field: str) -> None:
    _hook(ws, hook)
    code, lines = _errors(claw)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"configs/cases/alpha/test.yaml: deterministic_checks[0].python_hook.{field}: "), lines


@pytest.mark.parametrize("hook", [
    {"import_path": "json.decoder", "callable_name": "prüfe"},
    {"import_path": "prüfungen.köpfe", "callable_name": "_check2"},
])
def test_a_hook_named_with_python_identifiers_validates(ws: Workspace, claw: Claw, hook: dict[str, Any]) -> None:
    _hook(ws, hook)
    code, lines = _errors(claw)
    assert code == 0, lines
