"""`claw validate` on the shared compat corpora, on our own configs/, and its output formats."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.config.workspace_builder import REPO, build_base, claw, compat_or_skip, edit_yaml

SPECIALIZED = "configs/suites/openclaw_specialized_agents_suite.yaml"


def _copy_examples(tmp_path: Path) -> Path:
    root = tmp_path / "examples"
    shutil.copytree(compat_or_skip() / "examples", root)
    return root


def test_examples_without_the_private_suite_are_valid(tmp_path: Path) -> None:
    root = _copy_examples(tmp_path)
    (root / SPECIALIZED).unlink()
    result = claw("validate", str(root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "OK: 5 cases, 2 suites, 2 run profiles, 1 evaluation profile, 1 agent"


def test_examples_name_the_suite_with_unknown_cases(tmp_path: Path) -> None:
    root = _copy_examples(tmp_path)
    result = claw("validate", str(root))
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    error_lines = lines[:-1]
    assert error_lines and all(line.startswith(SPECIALIZED + ": ") for line in error_lines)
    first = error_lines[0]
    assert first.startswith(f"{SPECIALIZED}: case_selection.include_case_ids: unknown case ids: ")
    for n in range(1, 13):
        assert f"case_{n:02d}_" in first
    assert any("agent_assignments[0].agent_id: agent 'tapas' not found" in line for line in error_lines)
    assert lines[-1].startswith(f"{len(error_lines)} errors in 1 file")


def test_examples_configs_dir_itself_as_root() -> None:
    configs = compat_or_skip() / "examples" / "configs"
    result = claw("validate", str(configs))
    assert result.returncode == 2
    # Paths are relative to the ROOT given, which here is configs/ itself.
    assert result.stdout.startswith("suites/openclaw_specialized_agents_suite.yaml: ")


def test_fixture_is_valid_and_its_hook_file_is_checked(tmp_path: Path) -> None:
    fixture = compat_or_skip() / "fixture"
    result = claw("validate", str(fixture))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: 1 case, 1 suite, 2 run profiles, 1 evaluation profile, 1 agent")
    copy = tmp_path / "fixture"
    shutil.copytree(fixture, copy)
    (copy / "configs/cases/example_case/hooks/custom_check.py").unlink()
    broken = claw("validate", str(copy))
    assert broken.returncode == 2
    assert broken.stdout.splitlines()[0] == (
        "configs/cases/example_case/test.yaml: deterministic_checks[1].python_hook.path: "
        "file not found: hooks/custom_check.py (paths are relative to test.yaml)"
    )


def test_fixture_implicit_default_prompt(tmp_path: Path) -> None:
    copy = tmp_path / "fixture"
    shutil.copytree(compat_or_skip() / "fixture", copy)
    profile = copy / "configs/evaluation_profiles/default.yaml"
    edit_yaml(profile, lambda data: data.pop("judge_system_prompt_path"))
    assert claw("validate", str(copy)).returncode == 0  # prompts/judge_system_default.md beside it
    (copy / "configs/evaluation_profiles/prompts/judge_system_default.md").unlink()
    result = claw("validate", str(copy))
    assert result.returncode == 2
    assert "configs/evaluation_profiles/default.yaml: judge_system_prompt_path: no judge system prompt" in result.stdout


def test_our_own_configs_are_valid() -> None:
    result = claw("validate", str(REPO))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: ")
    # validate with no ROOT uses the workspace around the current directory
    nested = claw("validate", cwd=REPO / "configs" / "cases")
    assert nested.returncode == 0, nested.stdout + nested.stderr


def test_every_error_is_printed_and_json_output(tmp_path: Path) -> None:
    root = build_base(tmp_path / "ws")
    edit_yaml(root / "configs/cases/alpha/test.yaml", lambda d: d.update(case_id="Alpha", title=""))
    edit_yaml(root / "configs/suites/main.yaml", lambda d: d.update(colour="blue"))
    text = claw("validate", str(root))
    assert text.returncode == 2
    assert text.stdout.splitlines() == [
        "configs/cases/alpha/test.yaml: case_id: must match ^[a-z0-9][a-z0-9_-]*$ "
        "(lowercase letters, digits, '_' or '-'), got 'Alpha'",
        "configs/cases/alpha/test.yaml: title: must not be empty",
        "configs/suites/main.yaml: colour: unknown field 'colour' "
        "(allowed: schema_version, suite_id, title, models, case_selection, openclaw, metadata)",
        "3 errors in 2 files (valid: 2 cases, 1 suite, 1 run profile, 1 evaluation profile, 1 agent)",
    ]
    result = claw("validate", "--json", str(root))
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["errors"][2] == {"path": "configs/suites/main.yaml", "field": "colour",
                                   "message": report["errors"][2]["message"]}
    assert [e["field"] for e in report["errors"]] == ["case_id", "title", "colour"]
    assert report["counts"]["cases"] == 2 and report["counts"]["errors"] == 3
    ok = json.loads(claw("validate", "--json", str(REPO)).stdout)
    assert ok["ok"] is True and ok["errors"] == [] and ok["counts"]["cases"] >= 6


def test_not_a_workspace_is_a_usage_error(tmp_path: Path) -> None:
    result = claw("validate", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("claw: error: ") and "no configs/ directory" in result.stderr
    assert "Traceback" not in result.stderr
