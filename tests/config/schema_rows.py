"""The config reference, field by field, as rows: each form it allows (every written form: a list or null, an int
where a float is asked for, an empty section) and each form it forbids with the field and words the error must have.

Used by tests/config/test_schema_table.py, which writes one file per row into a workspace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

DELETE = object()  # a row's value that removes the field


@dataclass(frozen=True)
class Row:
    kind: str  # llm_case, claw_case, suite, run_profile, evaluation_profile, agent
    field: str  # the dotted path as written, a list index as [i]
    value: Any
    error: str | None = None  # forbidden: the field path the one error line names
    says: str = ""  # forbidden: words of the message
    builds: bool = True  # allowed: built with the stand-in (False: validate only, and say why beside the row)
    also: tuple[tuple[str, Any], ...] = ()  # other fields the row sets first

    @property
    def label(self) -> str:
        shown = "<deleted>" if self.value is DELETE else repr(self.value)
        return f"{self.kind}:{self.field}={shown[:40]}"


def set_field(doc: dict[str, Any], field: str, value: Any) -> None:
    """Set (or with DELETE remove) `a.b[0].c` in `doc`, making the mappings on the way."""
    steps: list[str | int] = []
    for part in field.split("."):
        name, *indexes = re.split(r"\[", part)
        if name:
            steps.append(name)
        steps.extend(int(i.rstrip("]")) for i in indexes)
    node: Any = doc
    for step in steps[:-1]:
        node = node[step] if isinstance(step, int) else node.setdefault(step, {})
    last = steps[-1]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value


def _ok(kind: str, field: str, *values: Any, builds: bool = True, **also: Any) -> list[Row]:
    return [Row(kind, field, value, builds=builds, also=tuple(also.items())) for value in values]


RUBRIC = {  # the reference's own example
    "version": 1, "scale": {"min": 0, "max": 10, "anchors": {
        10: "All required steps completed correctly and concisely.", "7": "Mostly correct.", "0": "No attempt."}},
    "criteria": [{"name": "Tool-grounded correctness", "what_good_looks_like": "Uses required tools.",
                  "what_bad_looks_like": "Invents results."}],
    "scoring_instructions": "Use this rubric to set overall.score.\n",
}
ALL_DIMENSIONS = ["task", "process", "autonomy", "closeness", "efficiency", "spark"]


def _check(**declarative: Any) -> list[dict[str, Any]]:
    return [{"check_id": "c1", "dimensions": ["task"], "declarative": declarative}]


ALLOWED: list[Row] = [
    # test case: top level and runner (extra runner keys are case-level settings)
    *_ok("llm_case", "title", "Any text at all"),
    *_ok("llm_case", "runner.temperature", 0, 0.7, 2),
    *_ok("llm_case", "runner.top_p", 1, 0.9),
    *_ok("llm_case", "runner.max_tokens", 1024),
    *_ok("llm_case", "runner.seed", None, 7),
    *_ok("llm_case", "runner.timeout_seconds", 60),
    *_ok("llm_case", "runner.retries", 0, 2),
    *_ok("llm_case", "runner.max_turns", 8),
    *_ok("llm_case", "runner.custom_setting", {"passed": "through"}),
    # input and messages
    *_ok("llm_case", "input.messages", [{"role": "user", "content": "Hi."}],
         [{"role": "user", "content": "Hi.", "name": "alice"}],
         [{"role": "user", "content": "Hi.", "name": None}],
         [{"role": "user", "content": ""}],
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi."},
          {"role": "assistant", "content": "Hello."}, {"role": "tool", "content": "42"},
          {"role": "user", "content": "And?"}],
         [{"role": "user", "source": {"path": "messages/ask.yaml"}}],
         [{"role": "user", "source": {"path": "messages/ask.yaml", "format": "yaml"}}],
         [{"role": "user", "source": {"path": "messages/ask.json"}}],
         [{"role": "user", "source": {"path": "messages/ask.json", "format": "json"}}],
         [{"role": "user", "source": {"path": "messages/one.yaml", "format": None}}],
         [{"role": "user", "source": {"path": "messages/text.yaml"}}]),
    *_ok("llm_case", "input.attachments", ["files/data.txt"], [], None),
    *_ok("llm_case", "input.turns", [], None),
    *_ok("llm_case", "input.context", {}, None, {"llm_probe": {"tools": ["exec_shell", "write_file", "read_file",
                                                                         "web_search"]}},
         {"llm_probe": {"tools": []}}, {"anything": {"free": [1, 2]}}),
    # expectations
    *_ok("llm_case", "expectations", {}, None, {"hard_expectations": [{"text": "Answers with 4."}]},
         {"soft_expectations": [{"text": "Brief.", "weight": 0.5}, {"text": "Polite.", "weight": 2}]},
         # (any number, as the reference system's float; the judge sees no share of a group with a negative one)
         {"soft_expectations": [{"text": "Brief.", "weight": 0}, {"text": "Polite.", "weight": -1}]},
         {"hard_expectations": None, "soft_expectations": []},
         {"hard_expectations": [{"text": "Answers.", "weight": 1.0, "metadata": {"why": "core"}}]}),
    # rubric
    *_ok("llm_case", "rubric", RUBRIC, None, {}, {"scale": {"min": 0.5, "max": 9.5}}, {"criteria": None},
         {"scale": None}, {"version": 1, "scale": {"anchors": {}}}),
    # deterministic checks: every kind with its fields
    *_ok("llm_case", "deterministic_checks", None, [],
         _check(kind="final_response_present"),
         _check(kind="tool_call_count", count=0),
         _check(kind="file_exists", path="files/data.txt"),
         _check(kind="file_contains", path="files/data.txt", text="numbers"),
         _check(kind="path_exists", path="files"),
         _check(kind="status_is", status="success"),
         _check(kind="output_artifact_present", artifact_type="report"),
         _check(kind="output_artifact_present"),
         [{"check_id": "c1", "description": "Anything.", "dimensions": ALL_DIMENSIONS,
           "declarative": {"kind": "final_response_present"}}],
         [{"check_id": "c1", "dimensions": None, "declarative": {"kind": "final_response_present"}}],
         [{"check_id": "c1", "dimensions": [], "declarative": {"kind": "final_response_present"}}],
         [{"check_id": "c1", "python_hook": {"path": "hooks/check.py", "callable_name": "check"}}],
         [{"check_id": "c1", "python_hook": {"import_path": "json.decoder", "callable_name": "JSONDecoder"}}],
         [{"check_id": "a", "declarative": {"kind": "final_response_present"}},
          {"check_id": "b", "declarative": {"kind": "status_is", "status": "success"}}]),
    *_ok("llm_case", "tags", [], None, ["smoke", "extra"], [" spaced ", "smoke", "smoke"]),
    *_ok("llm_case", "metadata", {}, None, {"owner": "qa", "nested": {"list": [1, "two", None]}},
         {2024: "launch", True: "yes", None: "none", 2.5: "x"}, {"nested": {1: "one", "b": "two"}}),
    *_ok("llm_case", "runner.custom_setting", {1: "a", "b": 2}),
    *_ok("llm_case", "input.context", {1: "a", "llm_probe": {"tools": ["read_file"], 2: "b"}}),
    # OpenClaw cases: validated only (a build needs the container runtime)
    *_ok("claw_case", "input.turns", [{"role": "user", "content": "Create draft.md."},
                                      {"role": "user", "content": "Revise draft.md."}], builds=False),
    *_ok("claw_case", "input.context", {"openclaw": {"expected_artifact": "report.md"}},
         {"openclaw": {"expected_artifact": ["a.md", "b.md"]}}, builds=False),
    *_ok("claw_case", "deterministic_checks",
         _check(kind="openclaw_workspace_file_present", relative_path="report.md"),
         _check(kind="openclaw_workspace_file_present", relative_path="report.md", contains="Done"),
         _check(kind="openclaw_workspace_file_present", relative_path="report.md", contains_all=["a", "b"]),
         _check(kind="openclaw_workspace_file_present", relative_path="report.md", contains_any=["a"]),
         _check(kind="openclaw_workspace_file_present", relative_path="r.md", contains_all=["a"],
                contains_any=["b"]), builds=False),
    # suite
    *_ok("suite", "models", [{"model_id": "m1", "requested_model": "vendor/m1", "label": "M one"}],
         [{"model_id": "m1", "requested_model": "vendor/m1", "label": None}],
         [{"model_id": "m1", "openrouter_model": "vendor/m1"}],
         [{"model_id": "m1", "provider": "vendor", "model_name": "m1"}],
         [{"model_id": "vendor-m1"}],
         [{"model_id": "m1", "requested_model": "vendor/m1", "primary_params": {"reasoning": {"effort": "low"}}}]),
    # claw's own model keys: which OpenAI-compatible server (not built: it would call that server)
    *_ok("suite", "models", [{"model_id": "m1", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "LOCAL_KEY"}],
         [{"model_id": "m1", "base_url": None, "api_key_env": None}],
         [{"model_id": "m1", "base_url": "http://[::1]:9/v1/"}], builds=False),
    *_ok("suite", "case_selection", {}, None, {"include_case_ids": ["base_case"]}, {"include_tags": ["smoke"]},
         {"exclude_case_ids": ["claw_base"]}, {"exclude_tags": ["claw"]},
         {"include_case_ids": None, "include_tags": ["smoke"], "exclude_case_ids": [], "exclude_tags": None}),
    *_ok("suite", "openclaw", {}, None, {"agent_assignments": None}, {"agent_assignments": []},
         {"agent_assignments": [{"agent_id": "helper", "case_selection": {"include_case_ids": ["claw_base"]}},
                                {"agent_id": "helper", "case_selection": {"include_tags": ["long_context"],
                                                                          "exclude_case_ids": ["claw_base"]}}]}),
    *_ok("suite", "metadata", {}, None, {"owner": "qa"}, {1: "a", "b": {2: "c", "d": "e"}}),
    # run profile
    *_ok("run_profile", "runner_defaults", {}, None, {"temperature": 0, "max_tokens": 1024, "timeout_seconds": 60,
                                                      "retries": 2, "max_turns": 8, "top_p": 0.5, "seed": None}),
    *_ok("run_profile", "model_overrides", {}, None, {"m1": {"max_tokens": 4096, "timeout_seconds": 120}},
         {"m1": None}, {"unknown_model": {"temperature": 1}}, {"m1": {"logit_bias": {50256: -100, "x": 1}}}),
    *_ok("run_profile", "execution_policy", {}, None, {"max_concurrency": 1}, {"run_repetitions": 3},
         {"fail_fast": True, "stop_on_runner_error": False},
         {"max_concurrency": 2, "run_repetitions": 1, "fail_fast": False, "stop_on_runner_error": True}),
    *_ok("run_profile", "openclaw", DELETE, None,
         {"agent_id": "helper", "image": "example/openclaw:1", "timeout_seconds": 300},
         {"agent_id": "helper", "image": "example/openclaw:1", "timeout_seconds": 300, "docker_cli": "podman"}),
    # evaluation profile (a profile without judge_runs validates; a build cannot evaluate with it)
    *_ok("evaluation_profile", "judges", None, [], builds=False, judge_runs=DELETE),
    *_ok("evaluation_profile", "judges[0].model", None, "judge/j1"),
    *_ok("evaluation_profile", "judges[0].request_options", {"temperature": 0.0, "reasoning": {"effort": "none"}},
         None),
    *_ok("evaluation_profile", "judges[0].label", "Extra judge keys are kept"),
    *_ok("evaluation_profile", "judges[0].batch", False, None),
    *_ok("evaluation_profile", "judges[0].timeout_seconds", 30, 0.5, None),  # (claw's own; retries 0 in the base)
    *_ok("suite", "case_selection", {"include_tags": [" smoke "]}),  # (trimmed, as a case's tags are)
    *_ok("evaluation_profile", "judges[0].request_options", {"logit_bias": {50256: -100, "x": 1}}),
    *_ok("evaluation_profile", "judge_runs", None, [], builds=False),
    *_ok("evaluation_profile", "judge_runs[0].repetitions", 1, 2),
    *_ok("evaluation_profile", "judge_runs[0].sample_size", None, 1),
    *_ok("evaluation_profile", "aggregation", {}, None, {"method": "median"}, {"method": "mean"},
         {"method": "majority_vote"}, {"method": "all_pass"}, {"pass_threshold": None}, {"pass_threshold": 0.5},
         {"pass_threshold": 1}),
    *_ok("evaluation_profile", "anchors", {}, None, {"enabled": False}, {"references": None},
         {"enabled": True, "references": [{"anchor_id": "perfect_tool_use", "label": "Perfect tool-use chain",
                                           "text": "Used all three tools in order."}]}),
    *_ok("evaluation_profile", "security_policy", {}, None,
         {"allow_local_python_hooks": True, "network_access": "allow", "redact_secrets": False},
         {"allow_local_python_hooks": False, "network_access": "deny", "redact_secrets": True}),
    *_ok("evaluation_profile", "judge_system_prompt", "You are a strict judge.\nAnswer in JSON."),
    *_ok("evaluation_profile", "judge_system_prompt_path", "prompts/judge.md", "prompts/judge.txt", None, ""),
    *_ok("evaluation_profile", "metadata", {"owner": "qa"}, None),
    # agent (validated only: a build needs the container runtime)
    *_ok("agent", "description", "A summary.", None, builds=False),
    *_ok("agent", "tags", [], None, ["support"], builds=False),
    *_ok("agent", "openclaw", {}, None, {"model_defaults": None},
         {"identity": {"name": "Helper"}, "agents_defaults": {"thinking": "low"},
          "agent": {"id": "support-agent", "prompt": "Be helpful."},
          "model_defaults": {"aliases": {"default": "Main"}, "fallbacks": [],
                             "primary_params": {"reasoning": {"effort": "low"}}, "extra_key": 1}},
         {"identity": None, "agents_defaults": None, "agent": None},
         {"identity": {1: "one", "name": "x"}, "agents_defaults": {"a": {2: "b", "c": "d"}}},
         {"model_defaults": {"fallbacks": None, "aliases": None}}, builds=False),
]


def _no(kind: str, field: str, value: Any, error: str, says: str, **also: Any) -> Row:
    return Row(kind, field, value, error=error, says=says, also=tuple(also.items()))


FORBIDDEN: list[Row] = [
    _no("llm_case", "schema_version", DELETE, "schema_version", "required field is missing"),
    _no("llm_case", "schema_version", 2, "schema_version", "must be 1"),
    _no("llm_case", "schema_version", "1", "schema_version", "must be 1"),
    _no("llm_case", "case_id", "Bad Case", "case_id", "must match"),
    _no("llm_case", "case_id", DELETE, "case_id", "required field is missing"),
    _no("llm_case", "title", DELETE, "title", "required field is missing"),
    _no("llm_case", "title", "", "title", "must not be empty"),
    _no("llm_case", "title", 5, "title", "expected a string"),
    _no("llm_case", "runner", DELETE, "runner", "required field is missing"),
    _no("llm_case", "runner.type", "docker", "runner.type", "expected one of llm_probe, openclaw"),
    _no("llm_case", "runner.type", DELETE, "runner.type", "required field is missing"),
    _no("llm_case", "runner.type", None, "runner.type", "expected one of llm_probe, openclaw, got null"),
    _no("llm_case", "runner.temperature", 3, "runner.temperature", "from 0 to 2"),
    _no("llm_case", "runner.top_p", 1.5, "runner.top_p", "from 0 to 1"),
    _no("llm_case", "runner.max_tokens", "1024", "runner.max_tokens", "expected an integer"),
    _no("llm_case", "runner.seed", 1.5, "runner.seed", "expected an integer or null"),
    _no("llm_case", "runner.retries", -1, "runner.retries", "expected an integer"),
    _no("llm_case", "runner.max_turns", 0, "runner.max_turns", "expected an integer"),
    _no("llm_case", "input", DELETE, "input", "required field is missing"),
    _no("llm_case", "input", None, "input", "expected a mapping, got null"),
    _no("llm_case", "runner", None, "runner", "expected a mapping, got null"),
    _no("llm_case", "input.mesages", [], "input.mesages", "unknown field 'mesages'"),
    _no("llm_case", "input.messages", {"role": "user"}, "input.messages", "expected a list"),
    _no("llm_case", "input.messages[0].role", "robot", "input.messages[0].role", "expected one of system, user"),
    _no("llm_case", "input.messages[0]", {"role": "user"}, "input.messages[0]", "set one of 'content' or 'source'"),
    _no("llm_case", "input.messages[0].source", {"path": "messages/ask.yaml"}, "input.messages[0]",
        "not both"),
    _no("llm_case", "input.messages[0].content", 4, "input.messages[0].content", "expected a string"),
    _no("llm_case", "input.messages[0].nmae", "x", "input.messages[0].nmae", "unknown field 'nmae'"),
    _no("llm_case", "input.messages[0]", {"role": "user", "source": {"path": "messages/ask.yaml", "format": "toml"}},
        "input.messages[0].source.format", "expected one of yaml, json"),
    _no("llm_case", "input.messages[0]", {"role": "user", "source": {"format": "yaml"}},
        "input.messages[0].source.path", "required field is missing"),
    _no("llm_case", "input.attachments", "files/data.txt", "input.attachments", "expected a list"),
    _no("llm_case", "input.attachments", [3], "input.attachments[0]", "expected a string"),
    _no("llm_case", "input.context", ["a"], "input.context", "expected a mapping"),
    _no("llm_case", "input.context", {"llm_probe": {"tools": ["exec_shell", "teleport"]}},
        "input.context.llm_probe.tools[1]", "unknown tool 'teleport'"),
    _no("llm_case", "input.context", {"llm_probe": {"tools": "exec_shell"}}, "input.context.llm_probe.tools",
        "expected a list"),
    _no("llm_case", "input.context", {"openclaw": {"expected_artifact": 3}},
        "input.context.openclaw.expected_artifact", "expected a file name"),
    # (s60-qa2: accepted, and the run then kept no key output without a word)
    _no("llm_case", "input.context", {"openclaw": {"expected_artifact": "../../etc/passwd"}},
        "input.context.openclaw.expected_artifact", "leaves the run's workspace"),
    _no("llm_case", "input.context", {"openclaw": {"expected_artifact": ["report.md", ""]}},
        "input.context.openclaw.expected_artifact[1]", "names the run's workspace itself"),
    _no("llm_case", "expectations", {"hard_expectations": [{"weight": 1}]}, "expectations.hard_expectations[0].text",
        "required field is missing"),
    _no("llm_case", "expectations", {"hard_expectations": ["Answers."]}, "expectations.hard_expectations[0]",
        "expected a mapping"),
    _no("llm_case", "expectations", {"soft_expectations": [{"text": "x", "weight": "heavy"}]},
        "expectations.soft_expectations[0].weight", "expected a number"),
    _no("llm_case", "expectations", {"hard": []}, "expectations.hard", "unknown field 'hard'"),
    _no("llm_case", "rubric", {"version": 2}, "rubric.version", "expected one of 1"),
    _no("llm_case", "rubric", {"scale": {"min": -1}}, "rubric.scale.min", "must be >= 0"),
    _no("llm_case", "rubric", {"scale": {"min": 5, "max": 5}}, "rubric.scale.max", "greater than min"),
    _no("llm_case", "rubric", {"scale": {"anchors": {"10": 3}}}, "rubric.scale.anchors.10", "expected a string"),
    _no("llm_case", "rubric", {"criteria": [{"name": "x", "what_good_looks_like": "y"}]},
        "rubric.criteria[0].what_bad_looks_like", "required field is missing"),
    _no("llm_case", "deterministic_checks", {"check_id": "c1"}, "deterministic_checks", "expected a list"),
    _no("llm_case", "deterministic_checks", _check(kind="final_response_present") * 2,
        "deterministic_checks[1].check_id", "duplicate check_id"),
    _no("llm_case", "deterministic_checks", [{"check_id": "c1"}], "deterministic_checks[0]",
        "set either 'declarative' or 'python_hook'"),
    _no("llm_case", "deterministic_checks", [{"check_id": "c1", "dimensions": ["taste"],
                                               "declarative": {"kind": "final_response_present"}}],
        "deterministic_checks[0].dimensions[0]", "expected one of task, process"),
    _no("llm_case", "deterministic_checks", [{"check_id": "c1", "dimensions": "task",
                                               "declarative": {"kind": "final_response_present"}}],
        "deterministic_checks[0].dimensions", "expected a list"),
    _no("llm_case", "deterministic_checks", _check(kind="nope"), "deterministic_checks[0].declarative.kind",
        "expected one of final_response_present"),
    _no("llm_case", "deterministic_checks", _check(kind="tool_call_count"),
        "deterministic_checks[0].declarative.count", "requires 'count'"),
    _no("llm_case", "deterministic_checks", _check(kind="tool_call_count", count="2"),
        "deterministic_checks[0].declarative.count", "expected an integer"),
    _no("llm_case", "deterministic_checks", _check(kind="tool_call_count", expected=2),
        "deterministic_checks[0].declarative.expected", "use 'count'"),
    _no("llm_case", "deterministic_checks", _check(kind="file_contains", path="files/data.txt"),
        "deterministic_checks[0].declarative.text", "requires 'text'"),
    _no("llm_case", "deterministic_checks", _check(kind="file_exists", path="x", text="y"),
        "deterministic_checks[0].declarative.text", "does not apply to kind 'file_exists'"),
    _no("llm_case", "deterministic_checks", _check(kind="status_is", status="great"),
        "deterministic_checks[0].declarative.status", "expected one of success"),
    _no("llm_case", "deterministic_checks", _check(kind="openclaw_workspace_file_present", relative_path="a",
                                                   contains="x", contains_any=["y"]),
        "deterministic_checks[0].declarative.contains", "not both"),
    _no("llm_case", "deterministic_checks", [{"check_id": "c1", "python_hook": {"callable_name": "check"}}],
        "deterministic_checks[0].python_hook", "exactly one"),
    _no("llm_case", "deterministic_checks", [{"check_id": "c1", "python_hook": {"path": "hooks/check.py"}}],
        "deterministic_checks[0].python_hook.callable_name", "required field is missing"),
    _no("llm_case", "deterministic_checks", [{"check_id": "c1", "hook": {"path": "hooks/check.py"}}],
        "deterministic_checks[0].hook", "use 'python_hook'"),
    _no("llm_case", "tags", "smoke", "tags", "expected a list"),
    _no("llm_case", "tags", ["ok", 1], "tags[1]", "expected a string"),
    _no("llm_case", "metadata", ["a"], "metadata", "expected a mapping"),
    _no("llm_case", "owner", "qa", "owner", "unknown field 'owner'"),
    # suite
    _no("suite", "suite_id", "Main", "suite_id", "must match"),
    _no("suite", "title", DELETE, "title", "required field is missing"),
    _no("suite", "models", "m1", "models", "expected a list"),
    _no("suite", "models", [{"label": "x"}], "models[0].model_id", "required field is missing"),
    _no("suite", "models", [{"model_id": "m1"}, {"model_id": "m1"}], "models[1].model_id", "duplicate model_id"),
    _no("suite", "models", [{"model_id": "m1", "api_key": "k"}], "models[0].api_key", "looks like a credential"),
    _no("suite", "models", [{"model_id": "m1", "primary_params": "low"}], "models[0].primary_params",
        "expected a mapping"),
    _no("suite", "models", [{"model_id": "m1", "base_url": 8000}], "models[0].base_url", "http(s) URL"),
    _no("suite", "models", [{"model_id": "m1", "base_url": "localhost:8000/v1"}], "models[0].base_url",
        "http(s) URL"),
    _no("suite", "models", [{"model_id": "m1", "base_url": "ftp://host/v1"}], "models[0].base_url", "http(s) URL"),
    # (an unclosed IPv6 bracket: urlsplit's ValueError was the whole message, naming no field)
    _no("suite", "models", [{"model_id": "m1", "base_url": "http://[::1:8000/v1"}], "models[0].base_url",
        "http(s) URL"),
    _no("evaluation_profile", "judges[0].base_url", "http://127.0.0.1:99999/v1", "judges[0].base_url", "http(s) URL"),
    _no("suite", "models", [{"model_id": "m1", "api_key_env": ["KEY"]}], "models[0].api_key_env",
        "name of an environment variable"),
    _no("suite", "case_selection", {"include_tag": ["x"]}, "case_selection.include_tag", "unknown field"),
    _no("suite", "case_selection", {"include_tags": "smoke"}, "case_selection.include_tags", "expected a list"),
    _no("suite", "case_selection", {"include_case_ids": ["ghost"]}, "case_selection.include_case_ids",
        "unknown case ids: ghost"),
    _no("suite", "openclaw", {"agent_assignments": [{"agent_id": "helper", "case_selection": {}}]},
        "openclaw.agent_assignments[0].case_selection", "set include_case_ids or include_tags"),
    _no("suite", "openclaw", {"agent_assignments": [{"agent_id": "ghost",
                                                     "case_selection": {"include_tags": ["claw"]}}]},
        "openclaw.agent_assignments[0].agent_id", "agent 'ghost' not found"),
    _no("suite", "openclaw", {"agent_assignments": [{"agent_id": "helper", "case_selection": None}]},
        "openclaw.agent_assignments[0].case_selection", "expected a mapping, got null"),
    _no("suite", "openclaw", {"agents": []}, "openclaw.agents", "unknown field 'agents'"),
    # run profile
    _no("run_profile", "run_profile_id", DELETE, "run_profile_id", "required field is missing"),
    _no("run_profile", "runner_defaults", ["a"], "runner_defaults", "expected a mapping"),
    _no("run_profile", "runner_defaults", {"temperature": "hot"}, "runner_defaults.temperature", "expected a number"),
    _no("run_profile", "model_overrides", {"m1": {"max_tokens": 0}}, "model_overrides.m1.max_tokens",
        "expected an integer"),
    _no("run_profile", "model_overrides", {"Big Model": {}}, "model_overrides.Big Model", "not a valid model_id"),
    _no("run_profile", "execution_policy", {"max_concurrency": 0}, "execution_policy.max_concurrency",
        "must be >= 1"),
    _no("run_profile", "execution_policy", {"run_repetitions": "3"}, "execution_policy.run_repetitions",
        "expected an integer"),
    _no("run_profile", "execution_policy", {"run_repetitions": 2.0}, "execution_policy.run_repetitions",
        "expected an integer"),
    _no("run_profile", "execution_policy", {"fail_fast": "no"}, "execution_policy.fail_fast",
        "expected true or false"),
    _no("run_profile", "execution_policy", {"max_concurrency": None}, "execution_policy.max_concurrency",
        "expected an integer, got null"),
    _no("run_profile", "execution_policy", {"retry": 1}, "execution_policy.retry", "unknown field 'retry'"),
    _no("run_profile", "openclaw", {"agent_id": "helper", "timeout_seconds": 60}, "openclaw.image",
        "required field is missing"),
    _no("run_profile", "openclaw", {"agent_id": "helper", "image": "x"}, "openclaw.timeout_seconds",
        "required field is missing"),
    _no("run_profile", "openclaw", {"image": "x", "timeout_seconds": 60}, "openclaw.agent_id",
        "required field is missing"),
    _no("run_profile", "openclaw", {"agent_id": "ghost", "image": "x", "timeout_seconds": 60}, "openclaw.agent_id",
        "agent 'ghost' not found"),
    _no("run_profile", "openclaw", {"agent_id": "helper", "image": "x", "timeout_seconds": 0},
        "openclaw.timeout_seconds", "must be > 0"),
    _no("run_profile", "metadata", {"a": 1}, "metadata", "unknown field 'metadata'"),
    # evaluation profile
    _no("evaluation_profile", "evaluation_profile_id", "Judge", "evaluation_profile_id", "must match"),
    _no("evaluation_profile", "judges[0].judge_id", DELETE, "judges[0].judge_id", "required field is missing"),
    _no("evaluation_profile", "judges[0].type", DELETE, "judges[0].type", "required field is missing"),
    _no("evaluation_profile", "judges[0].token", "t", "judges[0].token", "looks like a credential"),
    _no("evaluation_profile", "judges[0].request_options", {"model": "other/judge"},
        "judges[0].request_options.model", "the judge's own"),
    _no("evaluation_profile", "judges[0].request_options", {"messages": []}, "judges[0].request_options.messages",
        "the judge's own"),
    _no("evaluation_profile", "judges[0].batch", "yes", "judges[0].batch", "expected true or false"),
    _no("evaluation_profile", "judges[0].base_url", "file:///tmp/x", "judges[0].base_url", "http(s) URL"),
    _no("evaluation_profile", "judges[0].api_key_env", 5, "judges[0].api_key_env", "name of an environment variable"),
    # (s72: each validated; the build paid for every run, then failed every judgement, or called another model)
    _no("evaluation_profile", "judges[0].retries", "two", "judges[0].retries", "expected an integer from 0 to 100"),
    _no("evaluation_profile", "judges[0].timeout_seconds", 0, "judges[0].timeout_seconds", "expected a number > 0"),
    _no("evaluation_profile", "judges[0].request_options", {"temperature": "hot"},
        "judges[0].request_options.temperature", "expected a number from 0 to 2"),
    _no("evaluation_profile", "judges[0].judge_model", 5, "judges[0].judge_model", "expected a string"),
    _no("suite", "models", [{"model_id": "m1", "openrouter_model": 5}], "models[0].openrouter_model",
        "expected a string"),
    _no("run_profile", "openclaw", {"agent_id": "helper", "image": "--privileged", "timeout_seconds": 60},
        "openclaw.image", "expected an OCI image reference"),
    _no("llm_case", "runner.temperature", "1e-1", "runner.temperature", "YAML 1.1 reads 1e-1 as text"),
    _no("evaluation_profile", "judge_runs[0].judge_id", "ghost", "judge_runs[0].judge_id", "unknown judge 'ghost'"),
    _no("evaluation_profile", "judge_runs[0].repetitions", 0, "judge_runs[0].repetitions", "must be >= 1"),
    _no("evaluation_profile", "judge_runs[0].sample_size", 5, "judge_runs[0].sample_size", "must be <= repetitions"),
    _no("evaluation_profile", "aggregation", {"method": "best"}, "aggregation.method", "expected one of median"),
    _no("evaluation_profile", "aggregation", {"method": None}, "aggregation.method", "all_pass, got null"),
    _no("evaluation_profile", "security_policy", {"redact_secrets": None}, "security_policy.redact_secrets",
        "expected true or false, got null"),
    _no("evaluation_profile", "aggregation", {"pass_threshold": 2}, "aggregation.pass_threshold", "must be <= 1"),
    _no("evaluation_profile", "anchors", {"enabled": "yes"}, "anchors.enabled", "expected true or false"),
    _no("evaluation_profile", "anchors", {"references": [{"anchor_id": "a", "label": "L"}]},
        "anchors.references[0].text", "required field is missing"),
    _no("evaluation_profile", "security_policy", {"network_access": "maybe"}, "security_policy.network_access",
        "expected one of deny, allow"),
    _no("evaluation_profile", "judge_system_prompt", "Inline too.", "judge_system_prompt", "not both",
        judge_system_prompt_path="prompts/judge.md"),
    _no("evaluation_profile", "judge_system_prompt_path", "prompts/missing.md", "judge_system_prompt_path",
        "not found"),
    # agent
    _no("agent", "agent_id", "someone_else", "agent_id", "must equal the directory name"),
    _no("agent", "title", DELETE, "title", "required field is missing"),
    _no("agent", "openclaw", {"model_defaults": {"fallbacks": ["x"]}}, "openclaw.model_defaults.fallbacks",
        "must be empty"),
    _no("agent", "openclaw", {"agents_defaults": {"model": "x"}}, "openclaw.agents_defaults.model",
        "comes from the suite"),
    _no("agent", "openclaw", {"agent": {"id": 5}}, "openclaw.agent.id", "expected a string"),
    _no("agent", "openclaw", {"persona": {}}, "openclaw.persona", "unknown field 'persona'"),
]
