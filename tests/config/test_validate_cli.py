"""`claw validate` on the compat corpus (tests/compat_corpus), on our own configs/, and its output formats."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.config.workspace_builder import COMPAT, REPO, build_base, claw, edit_yaml

BROKEN_SUITE = "configs/suites/broken.yaml"


def _copy_corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(COMPAT, root)
    return root


def test_corpus_is_valid() -> None:
    result = claw("validate", str(COMPAT))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "OK: 3 cases, 2 suites, 2 run profiles, 2 evaluation profiles, 2 agents"


def test_a_suite_with_unknown_cases_and_agent_is_named(tmp_path: Path) -> None:
    root = _copy_corpus(tmp_path)
    (root / BROKEN_SUITE).write_text(
        "schema_version: 1\nsuite_id: broken\ntitle: Broken\ncase_selection:\n"
        "  include_case_ids: [case_01_x, case_02_y, full_llm_case]\n"
        "openclaw:\n  agent_assignments:\n    - agent_id: tapas\n"
        "      case_selection: {include_tags: [openclaw]}\n")
    result = claw("validate", str(root))
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    error_lines = lines[:-1]
    assert error_lines and all(line.startswith(BROKEN_SUITE + ": ") for line in error_lines)
    assert error_lines[0].startswith(f"{BROKEN_SUITE}: case_selection.include_case_ids: unknown case ids: ")
    assert "case_01_x" in error_lines[0] and "case_02_y" in error_lines[0]
    assert any("agent_assignments[0].agent_id: agent 'tapas' not found" in line for line in error_lines)
    # The broken suite loads (its errors are with other files) but is not counted as valid (before session 75 the
    # summary said "valid: 3 suites").
    assert lines[-1] == (f"{len(error_lines)} errors in 1 file "
                         "(valid: 3 cases, 2 suites, 2 run profiles, 2 evaluation profiles, 2 agents)")
    # The configs/ directory itself as ROOT: paths are relative to it.
    result = claw("validate", str(root / "configs"))
    assert result.returncode == 2 and result.stdout.startswith("suites/broken.yaml: ")


def test_hook_file_is_checked(tmp_path: Path) -> None:
    copy = _copy_corpus(tmp_path)
    (copy / "configs/cases/llm/full_llm_case/hooks/length_check.py").unlink()
    broken = claw("validate", str(copy))
    assert broken.returncode == 2
    assert broken.stdout.splitlines()[0] == (
        "configs/cases/llm/full_llm_case/test.yaml: deterministic_checks[7].python_hook.path: "
        "file not found: hooks/length_check.py (paths are relative to test.yaml)"
    )


def test_implicit_default_prompt(tmp_path: Path) -> None:
    copy = _copy_corpus(tmp_path)
    profile = copy / "configs/evaluation_profiles/judge_full_v2.yaml"
    edit_yaml(profile, lambda data: data.pop("judge_system_prompt_path"))
    assert claw("validate", str(copy)).returncode == 2  # no prompts/judge_system_default.md beside it
    (copy / "configs/evaluation_profiles/prompts/judge_system.md").rename(
        copy / "configs/evaluation_profiles/prompts/judge_system_default.md")
    result = claw("validate", str(copy))
    assert result.returncode == 0, result.stdout


def test_mixed_workspace_file_check_styles_are_rejected(tmp_path: Path) -> None:
    copy = _copy_corpus(tmp_path)
    case = copy / "configs/cases/claw/notes_two_turns/test.yaml"
    edit_yaml(case, lambda d: d["deterministic_checks"][1]["declarative"].update(contains="tea"))
    result = claw("validate", str(copy))
    assert result.returncode == 2
    assert result.stdout.startswith("configs/cases/claw/notes_two_turns/test.yaml: deterministic_checks[1]")


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


def test_a_file_named_to_forge_output_lines_is_shown_escaped(tmp_path: Path) -> None:
    """Names come from files written by others: one with a newline must not print a line of its own
    (a fake "OK" under a real error, say)."""
    root = _copy_corpus(tmp_path)
    forged = root / "configs/cases/x\nOK: 3 cases, 2 suites"
    forged.mkdir()
    (forged / "test.yaml").write_text("schema_version: 2\n", encoding="utf-8")
    result = claw("validate", str(root))
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert not any(line.startswith("OK") for line in lines), result.stdout
    assert any(line.startswith("configs/cases/x\\x0aOK: 3 cases, 2 suites/test.yaml: ") for line in lines)


def test_every_error_the_command_line_prints_is_one_line(tmp_path: Path) -> None:
    result = claw("build", "--suite", "a\nb", "--run-profile", "standard", cwd=_copy_corpus(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("claw: error: could not resolve suite 'a\\x0ab'")
    assert len(result.stderr.splitlines()) == 1


def test_a_path_the_system_refuses_is_one_line_too(tmp_path: Path) -> None:
    """A name longer than the file system takes fails in the first stat of it, wherever that is."""
    name = "x" * 3000
    for args in (("archive", "import", name), ("validate", name), ("build", "--suite", name, "--run-profile", "p")):
        result = claw(*args, cwd=_copy_corpus(tmp_path / args[0]))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and len(result.stderr) < 2500, result.stderr
        assert "Traceback" not in result.stderr
