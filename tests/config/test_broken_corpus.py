"""One defect per workspace, each answered by `claw validate` with exit 2 and a precise line (run in this
process: tests/config/test_validate_cli.py runs it as a child)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.config.workspace_builder import build_base, edit_yaml, write_yaml
from tests.support.claw import Claw

CASE = "configs/cases/alpha/test.yaml"
CLAW_CASE = "configs/cases/claw_one/test.yaml"
SUITE = "configs/suites/main.yaml"
CLAW_SUITE = "configs/suites/claw.yaml"
PROFILE = "configs/run_profiles/standard.yaml"
EVAL = "configs/evaluation_profiles/judge.yaml"
AGENT = "configs/agents/helper/agent.yaml"


def _yaml(rel: str, change: Callable[[Any], None]) -> Callable[[Path], None]:
    return lambda root: edit_yaml(root / rel, change)


def _text(rel: str, text: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).write_text(text, encoding="utf-8")


def _remove(rel: str) -> Callable[[Path], None]:
    def run(root: Path) -> None:
        target = root / rel
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return run


def _directory_for(rel: str) -> Callable[[Path], None]:
    """The file replaced by a directory of the same name: there, but nothing to read."""
    def run(root: Path) -> None:
        (root / rel).unlink()
        (root / rel).mkdir()

    return run


def _set(path: list[str | int], value: Any) -> Callable[[Any], None]:
    def change(data: Any) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value

    return change


def _delete(path: list[str | int]) -> Callable[[Any], None]:
    def change(data: Any) -> None:
        for key in path[:-1]:
            data = data[key]
        del data[path[-1]]

    return change


def _copy_case(root: Path) -> None:
    shutil.copytree(root / "configs/cases/alpha", root / "configs/cases/alpha_copy")


def _duplicate_suite(root: Path) -> None:
    shutil.copy(root / SUITE, root / "configs/suites/main_again.yml")


def _ambiguous_assignment(data: Any) -> None:
    data["openclaw"]["agent_assignments"].append(
        {"agent_id": "helper", "case_selection": {"include_case_ids": ["claw_one"]}})


def _checks(index: int, spec: dict[str, Any]) -> Callable[[Any], None]:
    return _set(["deterministic_checks", index], spec)


# (id, mutation, file, field, a fragment of the message)
DEFECTS: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    ("yaml_syntax", _text(CASE, "schema_version: 1\ntitle: [unclosed\n"), CASE, "", "invalid YAML at line"),
    ("duplicate_yaml_key", _text(PROFILE, "schema_version: 1\nrun_profile_id: standard\ntitle: A\ntitle: B\n"),
     PROFILE, "", "invalid YAML at line 4, column 1: duplicate key 'title'"),
    ("top_level_list", _text(SUITE, "- suite_id: main\n"), SUITE, "", "top level must be a mapping, got a list"),
    # Values YAML has and JSON does not (a build hashing the case failed with a traceback): refused where written.
    ("yaml_nan", _text(CASE, "schema_version: 1\nmetadata:\n  score: .nan\n"), CASE, "",
     "invalid YAML at line 3, column 10: metadata.score: .nan is not a finite number"),
    ("yaml_infinity", _text(CASE, "schema_version: 1\nmetadata: {limit: -.inf}\n"), CASE, "",
     "-.inf is not a finite number"),
    ("yaml_set", _text(CASE, "schema_version: 1\nmetadata:\n  seen: !!set {a, b}\n"), CASE, "",
     "line 3, column 9: metadata.seen: a !!set value has no JSON form"),
    ("yaml_binary", _text(CASE, "schema_version: 1\nmetadata:\n  blob: !!binary aGVsbG8=\n"), CASE, "",
     "a !!binary value has no JSON form"),
    ("wrong_type", _yaml(PROFILE, _set(["execution_policy", "max_concurrency"], "two")), PROFILE,
     "execution_policy.max_concurrency", "expected an integer, got a string 'two'"),
    ("unknown_key", _yaml(CASE, _set(["input", "mesages"], [])), CASE, "input.mesages",
     "unknown field 'mesages' (allowed: messages, turns, attachments, context)"),
    ("missing_required", _yaml(CASE, _delete(["title"])), CASE, "title", "required field is missing"),
    ("bad_enum", _yaml(CASE, _set(["runner", "type"], "gpt")), CASE, "runner.type",
     "expected one of llm_probe, openclaw, got 'gpt'"),
    ("bad_id", _yaml(CASE, _set(["case_id"], "Bad.Id")), CASE, "case_id",
     "must match ^[a-z0-9][a-z0-9_-]*$ (lowercase letters, digits, '_' or '-'), got 'Bad.Id'"),
    ("content_and_source", _yaml(CASE, _set(["input", "messages", 1, "content"], "hi")), CASE,
     "input.messages[1]", "set either 'content' or 'source', not both"),
    ("rubric_max_le_min", _yaml(CASE, _set(["rubric", "scale", "max"], 0)), CASE, "rubric.scale.max",
     "must be greater than min"),
    ("duplicate_case_id", _copy_case, "configs/cases/alpha_copy/test.yaml", "case_id",
     "duplicate case_id 'alpha' (also defined in configs/cases/alpha/test.yaml)"),
    ("unknown_judge", _yaml(EVAL, _set(["judge_runs", 0, "judge_id"], "ghost")), EVAL,
     "judge_runs[0].judge_id", "unknown judge 'ghost' (declared judges: j1)"),
    ("unknown_case_in_suite", _yaml(SUITE, _set(["case_selection", "include_case_ids"], ["ghost_case"])),
     SUITE, "case_selection.include_case_ids", "unknown case ids: ghost_case"),
    ("missing_attachment", _remove("configs/cases/alpha/files/data.txt"), CASE, "input.attachments[0]",
     "file not found: files/data.txt"),
    ("missing_source_file", _remove("configs/cases/alpha/messages/ask.yaml"), CASE,
     "input.messages[1].source.path", "file not found: messages/ask.yaml"),
    ("missing_agent_dir", _remove("configs/agents/helper"), PROFILE, "openclaw.agent_id",
     "agent 'helper' not found"),
    ("judge_prompt_path_and_inline", _yaml(EVAL, _set(["judge_system_prompt"], "Be fair.")), EVAL,
     "judge_system_prompt", "set either judge_system_prompt_path or judge_system_prompt, not both"),
    ("fallbacks_not_empty", _yaml(AGENT, _set(["openclaw", "model_defaults", "fallbacks"], ["openai/x"])),
     AGENT, "openclaw.model_defaults.fallbacks", "must be empty"),
    ("forbidden_agent_model_key", _yaml(AGENT, _set(["openclaw", "agents_defaults"], {"model": "openai/x"})),
     AGENT, "openclaw.agents_defaults.model", "the benchmark model always comes from the suite"),
    ("contains_mixed", _yaml(CLAW_CASE, _set(["deterministic_checks", 0, "declarative", "contains_all"], ["a"])),
     CLAW_CASE, "deterministic_checks[0].declarative.contains",
     "use either 'contains' or 'contains_all'/'contains_any', not both"),
    ("pass_threshold_out_of_range", _yaml(EVAL, _set(["aggregation", "pass_threshold"], 1.5)), EVAL,
     "aggregation.pass_threshold", "must be <= 1"),
    ("schema_version_2", _yaml(SUITE, _set(["schema_version"], 2)), SUITE, "schema_version", "must be 1, got 2"),
    ("expected_instead_of_count",
     _yaml(CASE, _checks(1, {"check_id": "tool-count", "declarative": {"kind": "tool_call_count", "expected": 1}})),
     CASE, "deterministic_checks[1].declarative.expected", "use 'count'"),
    ("expected_instead_of_status",
     _yaml(CASE, _checks(0, {"check_id": "answered", "declarative": {"kind": "status_is", "expected": "success"}})),
     CASE, "deterministic_checks[0].declarative.expected", "use 'status'"),
    ("hook_instead_of_python_hook",
     _yaml(CASE, _checks(2, {"check_id": "hook", "hook": {"path": "hooks/check.py", "callable_name": "check"}})),
     CASE, "deterministic_checks[2].hook", "use 'python_hook'"),
    ("missing_hook_file", _remove("configs/cases/alpha/hooks/check.py"), CASE,
     "deterministic_checks[2].python_hook.path", "file not found: hooks/check.py"),
    ("missing_judge_prompt", _remove("configs/evaluation_profiles/prompts/judge.md"), EVAL,
     "judge_system_prompt_path", "file not found: prompts/judge.md"),
    # A misspelt price was a price of 0: costs shown smaller than they were
    ("pricing_field_misspelt", _yaml(SUITE, _set(["models", 0, "pricing"], {"inptu": 1.0, "output": 2.0})), SUITE,
     "models[0].pricing.inptu", "unknown field 'inptu' (allowed: input, output, cacheRead, cacheWrite, batch)"),
    ("pricing_negative", _yaml(EVAL, _set(["judges", 0, "pricing"], {"input": 1.0, "output": -2})), EVAL,
     "judges[0].pricing.output", "expected a number from 0 to 10,000, got -2"),
    ("pricing_past_any_price", _yaml(SUITE, _set(["models", 0, "pricing"], {"input": 1e300, "output": 2.0})), SUITE,
     "models[0].pricing.input", "expected a number from 0 to 10,000, got 1e+300"),
    ("pricing_not_a_mapping", _yaml(SUITE, _set(["models", 0, "pricing"], "cheap")), SUITE,
     "models[0].pricing", "expected a mapping of USD per 1M tokens"),
    # `cost`, OpenClaw's name for `pricing` (runners/pricing.py reads it), was not checked at all
    ("cost_field_misspelt", _yaml(SUITE, _set(["models", 0, "cost"], {"inptu": 1.0, "output": 2.0})), SUITE,
     "models[0].cost.inptu", "unknown field 'inptu' (allowed: input, output, cacheRead, cacheWrite)"),
    ("cost_negative", _yaml(EVAL, _set(["judges", 0, "cost"], {"input": 1.0, "output": -2})), EVAL,
     "judges[0].cost.output", "expected a number from 0 to 10,000, got -2"),
    ("cost_past_any_price", _yaml(SUITE, _set(["models", 0, "cost"], {"input": 1e300, "output": 2.0})), SUITE,
     "models[0].cost.input", "expected a number from 0 to 10,000, got 1e+300"),
    ("cost_not_a_mapping", _yaml(SUITE, _set(["models", 0, "cost"], "cheap")), SUITE,
     "models[0].cost", "expected a mapping of USD per 1M tokens"),
    ("cost_beside_pricing", _yaml(SUITE, _set(["models", 0], {"model_id": "m1", "pricing": {"input": 1, "output": 2},
                                                              "cost": {"input": 9, "output": 9}})), SUITE,
     "models[0].cost", "give prices once: 'pricing' or its OpenClaw name 'cost', not both"),
    # There but a directory: said so, not "file not found"
    ("attachment_is_a_directory", _directory_for("configs/cases/alpha/files/data.txt"), CASE, "input.attachments[0]",
     "files/data.txt is not a regular file (a directory)"),
    ("source_file_is_a_directory", _directory_for("configs/cases/alpha/messages/ask.yaml"), CASE,
     "input.messages[1].source.path", "messages/ask.yaml is not a regular file (a directory)"),
    ("hook_file_is_a_directory", _directory_for("configs/cases/alpha/hooks/check.py"), CASE,
     "deterministic_checks[2].python_hook.path", "hooks/check.py is not a regular file (a directory)"),
    ("judge_prompt_is_a_directory", _directory_for("configs/evaluation_profiles/prompts/judge.md"), EVAL,
     "judge_system_prompt_path", "prompts/judge.md is not a regular file (a directory)"),
    # Read as text by the runner: a number or a list was passed over (the prompt never reached AGENTS.md)
    ("agent_prompt_not_text", _yaml(AGENT, _set(["openclaw", "agent"], {"prompt": ["Be brief.", "Use tools."]})),
     AGENT, "openclaw.agent.prompt", "expected a string, got a list"),
    ("agent_cli_id_not_text", _yaml(AGENT, _set(["openclaw", "agent"], {"id": 12})), AGENT, "openclaw.agent.id",
     "expected a string, got an integer 12"),
    ("agent_id_not_dir_name", _yaml(AGENT, _set(["agent_id"], "other")), AGENT, "agent_id",
     "must equal the directory name 'helper'"),
    ("agent_without_workspace", _remove("configs/agents/helper/workspace"), AGENT, "",
     "missing workspace/ directory"),
    ("ambiguous_agent_assignment", _yaml(CLAW_SUITE, _ambiguous_assignment), CLAW_SUITE,
     "openclaw.agent_assignments", "case 'claw_one' matches 2 assignments"),
    ("unknown_assignment_agent", _yaml(CLAW_SUITE, _set(["openclaw", "agent_assignments", 0, "agent_id"], "nobody")),
     CLAW_SUITE, "openclaw.agent_assignments[0].agent_id", "agent 'nobody' not found"),
    ("duplicate_suite_id", _duplicate_suite, "configs/suites/main_again.yml", "suite_id",
     "duplicate suite_id 'main' (also defined in configs/suites/main.yaml)"),
    ("unknown_tool", _yaml(CASE, _set(["input", "context", "llm_probe", "tools"], ["teleport"])), CASE,
     "input.context.llm_probe.tools[0]", "unknown tool 'teleport'"),
    ("declarative_and_hook", _yaml(CASE, _set(["deterministic_checks", 0, "python_hook"],
                                              {"path": "hooks/check.py", "callable_name": "check"})),
     CASE, "deterministic_checks[0]", "set either 'declarative' or 'python_hook'"),
    ("bad_dimension", _yaml(CASE, _set(["deterministic_checks", 0, "dimensions"], ["speed"])), CASE,
     "deterministic_checks[0].dimensions[0]", "expected one of task, process, autonomy"),
    ("temperature_out_of_range", _yaml(PROFILE, _set(["runner_defaults", "temperature"], 5)), PROFILE,
     "runner_defaults.temperature", "expected a number from 0 to 2, got 5"),
    ("openclaw_timeout_zero", _yaml(PROFILE, _set(["openclaw", "timeout_seconds"], 0)), PROFILE,
     "openclaw.timeout_seconds", "must be > 0"),
    ("bad_aggregation_method", _yaml(EVAL, _set(["aggregation", "method"], "max")), EVAL,
     "aggregation.method", "expected one of median, mean, majority_vote, all_pass, got 'max'"),
    ("check_kind_field_mismatch",
     _yaml(CASE, _checks(1, {"check_id": "tool-count", "declarative": {"kind": "tool_call_count", "path": "x"}})),
     CASE, "deterministic_checks[1].declarative.path", "field 'path' does not apply to kind 'tool_call_count'"),
    ("assignment_selects_nothing", _yaml(CLAW_SUITE, _set(["openclaw", "agent_assignments", 0, "case_selection"],
                                                          {"exclude_tags": ["x"]})),
     CLAW_SUITE, "openclaw.agent_assignments[0].case_selection", "set include_case_ids or include_tags"),
    ("source_content_not_string", lambda root: write_yaml(root / "configs/cases/alpha/messages/ask.yaml",
                                                           [{"role": "user", "content": ["a"]}]),
     CASE, "input.messages[1].source", "messages/ask.yaml: [0].content: expected a string, got a list"),
    # Values no schema allows where a name is looked up (these were tracebacks: unhashable types)
    ("check_kind_not_a_string", _yaml(CASE, _set(["deterministic_checks", 0, "declarative", "kind"], ["a"])),
     CASE, "deterministic_checks[0].declarative.kind", "expected one of final_response_present"),
    ("source_role_not_a_string", lambda root: write_yaml(root / "configs/cases/alpha/messages/ask.yaml",
                                                          [{"role": ["user"], "content": "hi"}]),
     CASE, "input.messages[1].source", "[0].role: expected one of assistant, system, tool, user, got ['user']"),
    # Names and values that would forge output lines or flood the terminal: escaped, cut
    ("key_with_a_newline", _yaml(CASE, _set(["input", "a\nb"], 1)), CASE, "input.a\\x0ab",
     "unknown field 'a\\nb'"),
    ("huge_value", _yaml(SUITE, _set(["schema_version"], "x" * 5000)), SUITE, "schema_version",
     "must be 1, got 'xxxxxxxx"),
    ("huge_key", _yaml(SUITE, _set(["k" * 5000], 1)), SUITE, "k" * 300 + "... (cut: 5000 characters in all)",
     "unknown field 'kkkkkkkk"),
]


# Defects that legitimately surface in more than one file (every reference to the missing thing).
ERROR_COUNTS = {"missing_agent_dir": (2, 2)}


def test_corpus_is_large_enough() -> None:
    assert len(DEFECTS) >= 20
    assert len({d[0] for d in DEFECTS}) == len(DEFECTS)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = build_base(tmp_path_factory.mktemp("base"))
    code, out, err = Claw(root)("validate", str(root))
    assert code == 0, out + err
    return root


@pytest.mark.parametrize(("name", "mutate", "path", "field", "fragment"), DEFECTS, ids=[d[0] for d in DEFECTS])
def test_defect_is_reported(base: Path, tmp_path: Path, name: str, mutate: Callable[[Path], None],
                            path: str, field: str, fragment: str) -> None:
    root = tmp_path / "ws"
    shutil.copytree(base, root)
    mutate(root)
    code, out, err = Claw(root)("validate", str(root))
    output = out + err
    assert code == 2, output
    assert "Traceback" not in output
    assert all(len(line) < 2000 for line in output.splitlines())
    prefix = f"{path}: {field}: " if field else f"{path}: "
    lines = out.splitlines()
    matching = [line for line in lines if line.startswith(prefix) and fragment in line]
    assert matching, f"no line starting with {prefix!r} containing {fragment!r} in:\n{output}"
    # One defect, one error (unless it is referenced twice): the count line says so, nothing else appears.
    errors, files = ERROR_COUNTS.get(name, (1, 1))
    assert lines[-1].startswith(f"{errors} error{'s' * (errors > 1)} in {files} file"), output
    assert len(lines) == errors + 1, output
