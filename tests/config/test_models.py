"""Model-level rules: normalisation, strictness and the wording of errors (in-process, fast)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from clawstore.config import (
    Agent,
    DeterministicCheck,
    EvaluationProfile,
    JudgeRunConfig,
    ModelConfig,
    RunProfile,
    Suite,
    TestCase,
)
from clawstore.config.error_text import describe_all


def _case(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1, "case_id": "c1", "title": "T", "runner": {"type": "llm_probe"},
        "input": {"messages": [{"role": "user", "content": "hi"}]},
    }
    data.update(changes)
    return data


def _errors(model: type[BaseModel], data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return describe_all(info.value, model)


def test_tags_and_dimensions_are_normalised() -> None:
    case = TestCase.model_validate(_case(
        tags=[" smoke", "b", "", "smoke", "a "],
        deterministic_checks=[{"check_id": "x", "dimensions": ["task", "efficiency", "task"],
                               "declarative": {"kind": "final_response_present"}}],
    ))
    assert case.tags == ["a", "b", "smoke"]
    assert case.deterministic_checks[0].dimensions == ["efficiency", "task"]
    assert case.deterministic_checks[0].kind == "final_response_present"


def test_nulls_mean_empty_and_defaults_apply() -> None:
    case = TestCase.model_validate(_case(input={"messages": None, "attachments": None, "turns": None},
                                         tags=None, metadata=None))
    assert case.input.messages == [] and case.input.attachments == [] and case.tags == []
    assert case.expectations.hard_expectations == [] and case.rubric is None
    assert case.metadata == {}


def test_rubric_anchor_keys_may_be_numbers() -> None:
    case = TestCase.model_validate(_case(rubric={"scale": {"anchors": {10: "top", 0: "none"}}}))
    assert case.rubric is not None
    assert case.rubric.scale.anchors == {"10": "top", "0": "none"}
    assert (case.rubric.scale.min, case.rubric.scale.max) == (0, 10)


@pytest.mark.parametrize("version", [2, "1", True, 1.5, None])
def test_schema_version_must_be_the_integer_one(version: Any) -> None:
    assert _errors(TestCase, _case(schema_version=version))[0][0] == "schema_version"


def test_scalars_are_not_coerced() -> None:
    assert _errors(TestCase, _case(title=5)) == [
        ("title", "expected a string, got an integer 5 (YAML reads an unquoted number as a number: quote it for text)")]
    errors = _errors(RunProfile, {"schema_version": 1, "run_profile_id": "p", "title": "P",
                                  "execution_policy": {"fail_fast": "yes", "run_repetitions": 0}})
    assert ("execution_policy.run_repetitions", "must be >= 1, got 0") in errors
    assert ("execution_policy.fail_fast", "expected true or false, got a string 'yes'") in errors


def test_runner_settings_are_type_checked_where_they_appear() -> None:
    assert _errors(TestCase, _case(runner={"type": "llm_probe", "max_tokens": "5"})) == [
        ("runner.max_tokens", "expected an integer from 1 to 10,000,000, got '5'")]
    errors = _errors(RunProfile, {"schema_version": 1, "run_profile_id": "p", "title": "P",
                                  "model_overrides": {"m1": {"top_p": 2}, "Bad Id": {}}})
    assert ("model_overrides.m1.top_p", "expected a number from 0 to 1, got 2") in errors
    # unknown settings pass through untouched (they are the runner's business)
    case = TestCase.model_validate(_case(runner={"type": "llm_probe", "temperature": 0, "custom": [1]}))
    assert case.runner.settings == {"temperature": 0, "custom": [1]}


def test_message_needs_exactly_one_of_content_and_source() -> None:
    both = _case(input={"messages": [{"role": "user", "content": "a", "source": {"path": "m.yaml"}}]})
    assert _errors(TestCase, both) == [("input.messages[0]", "set either 'content' or 'source', not both")]
    neither = _case(input={"turns": [{"role": "user"}]})
    assert _errors(TestCase, neither) == [("input.turns[0]", "set one of 'content' or 'source'")]
    bad_format = _case(input={"messages": [{"role": "user", "source": {"path": "m.txt", "format": "toml"}}]})
    assert _errors(TestCase, bad_format) == [("input.messages[0].source.format",
                                              "expected one of yaml, json, got 'toml'")]


def test_check_kinds_and_their_fields() -> None:
    def check(decl: dict[str, Any]) -> DeterministicCheck:
        return DeterministicCheck.model_validate({"check_id": "c", "declarative": decl})

    assert check({"kind": "tool_call_count", "count": 0}).declarative.count == 0  # type: ignore[union-attr]
    assert check({"kind": "openclaw_workspace_file_present", "relative_path": "a.md",
                  "contains_any": ["x"], "contains_all": ["y"]}).declarative is not None
    assert check({"kind": "output_artifact_present", "artifact_type": "openclaw_key_output"}).declarative
    assert check({"kind": "output_artifact_present"}).declarative  # the reference: `artifact_type?`
    for decl, field, text in [
        ({"kind": "file_contains", "path": "a"}, "declarative.text", "kind 'file_contains' requires 'text'"),
        ({"kind": "output_artifact_present", "artifact_id": "Bad"}, "declarative.artifact_id", "must match"),
        ({"kind": "status_is", "status": "great"}, "declarative.status", "expected one of success, invalid"),
        ({"kind": "tool_call_count", "count": -1}, "declarative.count", "must be >= 0"),
        ({"kind": "nope"}, "declarative.kind", "expected one of final_response_present, tool_call_count"),
    ]:
        errors = _errors(DeterministicCheck, {"check_id": "c", "declarative": decl})
        assert errors[0][0] == field and text in errors[0][1], errors


def test_python_hook_targets() -> None:
    ok = DeterministicCheck.model_validate(
        {"check_id": "h", "python_hook": {"import_path": "pkg.checks", "callable_name": "run"}})
    assert ok.kind == "python_hook"
    errors = _errors(DeterministicCheck, {"check_id": "h", "python_hook": {
        "import_path": "pkg.checks", "path": "h.py", "callable_name": "run"}})
    assert errors == [("python_hook", "set either 'path' or 'import_path' (exactly one)")]
    errors = _errors(DeterministicCheck, {"check_id": "h", "python_hook": {"path": "h.py", "callable_name": "a-b"}})
    assert errors == [("python_hook.callable_name", "expected a Python identifier, got 'a-b'")]


def test_duplicate_check_ids_in_a_case() -> None:
    checks = [{"check_id": "x", "declarative": {"kind": "final_response_present"}}] * 2
    assert _errors(TestCase, _case(deterministic_checks=checks)) == [
        ("deterministic_checks[1].check_id", "duplicate check_id 'x' (also deterministic_checks[0])")]


def test_suite_models_keep_extras_and_reject_duplicates() -> None:
    suite = Suite.model_validate({"schema_version": 1, "suite_id": "s", "title": "S", "models": [
        {"model_id": "m", "requested_model": "a/b", "primary_params": {"reasoning": {"effort": "low"}}}]})
    assert suite.models[0].extras == {"primary_params": {"reasoning": {"effort": "low"}}}
    errors = _errors(Suite, {"schema_version": 1, "suite_id": "s", "title": "S",
                             "models": [{"model_id": "m"}, {"model_id": "m"}]})
    assert errors == [("models[1].model_id", "duplicate model_id 'm' (also models[0])")]


def test_evaluation_profile_rules() -> None:
    base = {"schema_version": 1, "evaluation_profile_id": "e", "title": "E"}
    profile = EvaluationProfile.model_validate({**base, "judge_system_prompt": "  ", "judge_system_prompt_path": ""})
    assert profile.judge_system_prompt is None and profile.judge_system_prompt_path is None
    assert profile.judge_runs == [] and profile.aggregation.method == "median"
    assert profile.security_policy.network_access == "deny" and profile.security_policy.redact_secrets
    judge = EvaluationProfile.model_validate({**base, "judges": [
        {"judge_id": "j", "type": "llm_probe", "request_options": {"reasoning": {"effort": "none"}}, "note": 1}]})
    assert judge.judges[0].request_options == {"reasoning": {"effort": "none"}}
    assert judge.judges[0].extras == {"note": 1}
    assert _errors(JudgeRunConfig, {"judge_run_id": "r", "judge_id": "j", "repetitions": 2, "sample_size": 3}) == [
        ("sample_size", "must be <= repetitions (2), got 3")]
    dupes = _errors(EvaluationProfile, {**base, "judges": [{"judge_id": "j", "type": "x"}] * 2})
    assert dupes == [("judges[1].judge_id", "duplicate judge_id 'j' (also judges[0])")]


def test_agent_rules() -> None:
    base = {"schema_version": 1, "agent_id": "a", "title": "A"}
    agent = Agent.model_validate({**base, "openclaw": {"agent": {"id": " a-cli "}, "model_defaults": {
        "aliases": {"default": "x"}, "primary_params": {"max_tokens": 10}, "thinking": "low"}}})
    assert agent.cli_agent_id == "a-cli"
    assert Agent.model_validate(base).cli_agent_id == "a"
    for fragment, field in [({"agent": {"model_id": "x"}}, "openclaw.agent.model_id"),
                            ({"model_defaults": {"primary_model": "x"}}, "openclaw.model_defaults.primary_model"),
                            ({"model_defaults": {"fallbacks": ["x"]}}, "openclaw.model_defaults.fallbacks"),
                            ({"identity": {"name": "n"}, "extra": {}}, "openclaw.extra")]:
        assert _errors(Agent, {**base, "openclaw": fragment})[0][0] == field


def test_model_config_accepts_open_keys() -> None:
    model = ModelConfig.model_validate({"model_id": "m", "openrouter_model": "x/y", "base_url": "http://h/v1"})
    assert model.extras["base_url"] == "http://h/v1" and model.display_name == "m"


def test_credentials_are_refused_in_open_objects() -> None:
    errors = _errors(Suite, {"schema_version": 1, "suite_id": "s", "title": "S",
                             "models": [{"model_id": "m", "api_key": "sk-or-v1-abc"}]})
    assert errors[0][0] == "models[0].api_key" and "looks like a credential" in errors[0][1]
    assert "sk-or-v1-abc" not in errors[0][1]  # the message never repeats the value
    errors = _errors(EvaluationProfile, {"schema_version": 1, "evaluation_profile_id": "e", "title": "E",
                                         "judges": [{"judge_id": "j", "type": "t",
                                                     "request_options": {"Authorization": "Bearer x"}}]})
    assert errors[0][0] == "judges[0].request_options.Authorization"
    assert ModelConfig.model_validate({"model_id": "m", "api_key_env": "MY_KEY"}).extras == {"api_key_env": "MY_KEY"}
