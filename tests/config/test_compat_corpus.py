"""The compat corpus (tests/compat_corpus): configs written for this project that use every field of
the config schema. It must validate and expand exactly as the schema says, on any clone.

Other corpora in the same layout can be checked too, where they exist: list their roots in
CLAW_EXTRA_COMPAT_CORPORA (os.pathsep-separated); without it there is no such test (not a skip).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.config import resolve_campaign
from tests.config.workspace_builder import COMPAT, claw, read_yaml

# Every field of the schema (docs/configuration.md), as paths into the YAML of each config kind;
# `[]` steps into list items. The corpus must use each one at least once.
SCHEMA_FIELDS: dict[str, set[str]] = {
    "case": {
        "schema_version", "case_id", "title", "runner.type", "runner.temperature", "runner.max_turns",
        "input.messages[].role", "input.messages[].content", "input.messages[].name",
        "input.messages[].source.path", "input.messages[].source.format", "input.turns[].role",
        "input.turns[].content", "input.attachments[]", "input.context.llm_probe.tools[]",
        "input.context.openclaw.expected_artifact", "expectations.hard_expectations[].text",
        "expectations.soft_expectations[].text", "expectations.soft_expectations[].weight", "rubric.version",
        "rubric.scale.min", "rubric.scale.max", "rubric.scale.anchors", "rubric.criteria[].name",
        "rubric.criteria[].what_good_looks_like", "rubric.criteria[].what_bad_looks_like",
        "rubric.scoring_instructions", "deterministic_checks[].check_id", "deterministic_checks[].dimensions[]",
        "deterministic_checks[].declarative.kind", "deterministic_checks[].declarative.count",
        "deterministic_checks[].declarative.path", "deterministic_checks[].declarative.text",
        "deterministic_checks[].declarative.status", "deterministic_checks[].declarative.artifact_type",
        "deterministic_checks[].declarative.relative_path", "deterministic_checks[].declarative.contains",
        "deterministic_checks[].declarative.contains_all[]", "deterministic_checks[].declarative.contains_any[]",
        "deterministic_checks[].python_hook.path", "deterministic_checks[].python_hook.import_path",
        "deterministic_checks[].python_hook.callable_name", "tags[]", "metadata",
    },
    "suite": {
        "schema_version", "suite_id", "title", "models[].model_id", "models[].label", "models[].requested_model",
        "models[].openrouter_model", "models[].provider", "models[].model_name",
        "models[].primary_params.reasoning.effort", "case_selection.include_case_ids[]",
        "case_selection.exclude_case_ids[]", "case_selection.include_tags[]", "case_selection.exclude_tags[]",
        "openclaw.agent_assignments[].agent_id", "openclaw.agent_assignments[].case_selection.include_tags[]",
        "openclaw.agent_assignments[].case_selection.exclude_case_ids[]", "metadata",
    },
    "run_profile": {
        "schema_version", "run_profile_id", "title", *(f"runner_defaults.{k}" for k in (
            "temperature", "top_p", "max_tokens", "seed", "timeout_seconds", "retries", "max_turns")),
        "model_overrides", "execution_policy.max_concurrency", "execution_policy.run_repetitions",
        "execution_policy.fail_fast", "execution_policy.stop_on_runner_error", "openclaw.agent_id",
        "openclaw.image", "openclaw.timeout_seconds", "openclaw.docker_cli",
    },
    "evaluation_profile": {
        "schema_version", "evaluation_profile_id", "title", "judge_system_prompt_path", "judge_system_prompt",
        "judges[].judge_id", "judges[].type", "judges[].model", "judges[].request_options.temperature",
        "judges[].request_options.reasoning.effort", "judge_runs[].judge_run_id", "judge_runs[].judge_id",
        "judge_runs[].repetitions", "judge_runs[].sample_size", "aggregation.method", "aggregation.pass_threshold",
        "anchors.enabled", "anchors.references[].anchor_id", "anchors.references[].label",
        "anchors.references[].text", "security_policy.allow_local_python_hooks", "security_policy.network_access",
        "security_policy.redact_secrets",
    },
    "agent": {
        "schema_version", "agent_id", "title", "description", "tags[]", "openclaw.identity",
        "openclaw.agents_defaults", "openclaw.agent.id", "openclaw.agent.prompt", "openclaw.model_defaults.aliases",
    },
}
# Mappings whose keys are free (model ids, anchor scores, arbitrary metadata): their presence is the field.
FREE_MAPPINGS = {"metadata", "rubric.scale.anchors", "model_overrides", "openclaw.identity", "openclaw.agents_defaults",
                 "openclaw.model_defaults.aliases", "input.context"}
KIND_GLOBS = {"case": "cases/**/test.yaml", "suite": "suites/*.y*ml", "run_profile": "run_profiles/*.yaml",
              "evaluation_profile": "evaluation_profiles/*.yaml", "agent": "agents/*/agent.yaml"}


def _paths(value: Any, prefix: str = "") -> Iterator[str]:
    if prefix:
        yield prefix
    if prefix in FREE_MAPPINGS and prefix != "input.context":
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _paths(item, f"{prefix}[]")


@pytest.mark.parametrize("kind", sorted(SCHEMA_FIELDS))
def test_the_corpus_uses_every_field_of_the_schema(kind: str) -> None:
    files = sorted((COMPAT / "configs").glob(KIND_GLOBS[kind]))
    assert files, kind
    used = {path for file in files for path in _paths(read_yaml(file))}
    assert SCHEMA_FIELDS[kind] - used == set()


def test_every_declarative_kind_and_message_role_is_used() -> None:
    cases = [read_yaml(f) for f in (COMPAT / "configs").glob(KIND_GLOBS["case"])]
    kinds = {c["declarative"]["kind"] for case in cases for c in case.get("deterministic_checks", [])
             if "declarative" in c}
    assert kinds == {"final_response_present", "tool_call_count", "file_exists", "file_contains", "path_exists",
                     "status_is", "output_artifact_present", "openclaw_workspace_file_present"}
    roles = {m["role"] for case in cases for m in case["input"].get("messages", [])}
    assert roles == {"system", "user", "assistant", "tool"}
    methods = {read_yaml(f).get("aggregation", {}).get("method")
               for f in (COMPAT / "configs").glob(KIND_GLOBS["evaluation_profile"])}
    assert methods >= {"mean", "majority_vote"}


def test_the_corpus_campaign_expands_as_the_schema_says() -> None:
    # The evaluation profile by file stem (judge_full_v2.yaml holds judge_full).
    campaign = resolve_campaign(COMPAT, "everything", "complete", "judge_full_v2")
    assert campaign.campaign_id == "everything__complete__judge_full"
    assert campaign.case_ids == ["full_llm_case", "notes_two_turns"]  # plain_case excluded by id
    resolved = {i.model_id: i.resolved_model for i in campaign.items}
    assert resolved == {"by_requested": "openai/gpt-4o-mini", "by_openrouter": "anthropic/claude-3.5-haiku",
                        "by_provider": "meta-llama/llama-3.1-8b-instruct", "by_id": "by_id",
                        "with_params": "openai/gpt-5"}
    llm = {i.model_id: i for i in campaign.items if i.case_id == "full_llm_case"}
    # runner_defaults -> model_overrides -> the case's runner keys (the case wins).
    assert llm["by_provider"].settings == {"temperature": 0.2, "top_p": 0.9, "max_tokens": 2048, "seed": 7,
                                           "timeout_seconds": 120, "retries": 2, "max_turns": 4}
    assert llm["by_id"].settings["max_tokens"] == 1024
    messages = llm["by_id"].messages
    assert [m.role for m in messages] == ["system", "user", "user", "assistant", "tool", "user"]
    assert messages[1].content.startswith("Attached context file: release_note.md\n\n--- BEGIN ATTACHMENT")
    assert messages[2].content == "Summarise the attached release note."
    assert messages[5].content.strip() == "Keep it under fifty words."
    claw_items = [i for i in campaign.items if i.case_id == "notes_two_turns"]
    assert {i.agent_id for i in claw_items} == {"reviewer_agent"}  # the assignment, not the profile default
    assert all(len(i.turns) == 2 and i.settings == {} for i in claw_items)
    assert campaign.judge_system_prompt == "You are a careful judge. Reply with one JSON object."
    inline = resolve_campaign(COMPAT, "llm_only", "bare", "inline")
    assert inline.judge_system_prompt == "You are a strict judge. Reply in JSON."
    assert inline.case_ids == ["full_llm_case"]  # plain_case has no llm_probe tag


EXTRA_CORPORA = [Path(p) for p in os.environ.get("CLAW_EXTRA_COMPAT_CORPORA", "").split(os.pathsep) if p]


if EXTRA_CORPORA:  # defined only when asked for: an empty parametrization would report a skip
    @pytest.mark.parametrize("root", EXTRA_CORPORA, ids=str)
    def test_extra_corpus_validates_without_a_traceback(root: Path) -> None:
        result = claw("validate", str(root))
        assert result.returncode in (0, 2), result.stderr
        assert "Traceback" not in result.stdout + result.stderr
