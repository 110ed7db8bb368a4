"""Build a small, valid workspace on disk that tests then break one way at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.support.workspace import yaml_text

REPO = Path(__file__).resolve().parents[2]
# A workspace written for this project that uses every field of the config schema (docs/configuration.md).
COMPAT = REPO / "tests" / "compat_corpus"


def write_yaml(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml_text(data), encoding="utf-8")


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def edit_yaml(path: Path, change: Callable[[Any], None]) -> None:
    data = read_yaml(path)
    change(data)
    write_yaml(path, data)


def llm_case(case_id: str, tags: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1,
        "case_id": case_id,
        "title": f"Case {case_id}",
        "runner": {"type": "llm_probe"},
        "input": {"messages": [{"role": "user", "content": f"Say {case_id}."}]},
        "deterministic_checks": [
            {"check_id": "answered", "dimensions": ["task"], "declarative": {"kind": "final_response_present"}}
        ],
        "tags": tags or ["smoke"],
    }
    data.update(extra)
    return data


def build_base(root: Path) -> Path:
    """A workspace every config kind appears in, valid as written (claw validate exits 0)."""
    configs = root / "configs"
    alpha = configs / "cases" / "alpha"
    write_yaml(alpha / "test.yaml", {
        "schema_version": 1,
        "case_id": "alpha",
        "title": "Alpha: source, attachment, hook, rubric",
        "runner": {"type": "llm_probe", "temperature": 0.2},
        "input": {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "source": {"path": "messages/ask.yaml"}},
            ],
            "attachments": ["files/data.txt"],
            "context": {"llm_probe": {"tools": ["read_file"]}},
        },
        "expectations": {"hard_expectations": [{"text": "Mentions the data."}]},
        "rubric": {"version": 1, "scale": {"min": 0, "max": 10, "anchors": {"10": "Perfect."}},
                   "criteria": [{"name": "Grounded", "what_good_looks_like": "Cites data.",
                                 "what_bad_looks_like": "Invents data."}]},
        "deterministic_checks": [
            {"check_id": "answered", "dimensions": ["task"], "declarative": {"kind": "final_response_present"}},
            {"check_id": "tool-count", "declarative": {"kind": "tool_call_count", "count": 1}},
            {"check_id": "hook", "python_hook": {"path": "hooks/check.py", "callable_name": "check"}},
        ],
        "tags": ["smoke", "data"],
    })
    write_yaml(alpha / "messages" / "ask.yaml", [{"role": "user", "content": "Summarise the attachment."}])
    (alpha / "files").mkdir()
    (alpha / "files" / "data.txt").write_text("numbers: 1 2 3\n", encoding="utf-8")
    (alpha / "hooks").mkdir()
    (alpha / "hooks" / "check.py").write_text("def check(artifact):\n    return True\n", encoding="utf-8")

    write_yaml(configs / "cases" / "group" / "beta" / "test.yaml", llm_case("beta", ["smoke"]))
    write_yaml(configs / "cases" / "claw_one" / "test.yaml", {
        "schema_version": 1,
        "case_id": "claw_one",
        "title": "OpenClaw case",
        "runner": {"type": "openclaw"},
        "input": {
            "messages": [{"role": "system", "content": "Keep state."}],
            "turns": [{"role": "user", "content": "Write a.md"}, {"role": "user", "content": "Write b.md"}],
            "context": {"openclaw": {"expected_artifact": "b.md"}},
        },
        "deterministic_checks": [
            {"check_id": "b-file", "declarative": {"kind": "openclaw_workspace_file_present",
                                                   "relative_path": "b.md", "contains": "done"}},
        ],
        "tags": ["claw"],
    })
    write_yaml(configs / "suites" / "main.yaml", {
        "schema_version": 1,
        "suite_id": "main",
        "title": "Main suite",
        "models": [{"model_id": "m1", "requested_model": "openai/gpt-4o-mini"},
                   {"model_id": "m2", "provider": "acme", "model_name": "tiny"}],
        "case_selection": {"include_tags": ["smoke"]},
    })
    write_yaml(configs / "suites" / "claw.yaml", {
        "schema_version": 1,
        "suite_id": "claw",
        "title": "OpenClaw suite",
        "models": [{"model_id": "m1", "requested_model": "openai/gpt-4o-mini"}],
        "case_selection": {"include_case_ids": ["claw_one"]},
        "openclaw": {"agent_assignments": [
            {"agent_id": "helper", "case_selection": {"include_tags": ["claw"]}},
        ]},
    })
    write_yaml(configs / "run_profiles" / "standard.yaml", {
        "schema_version": 1,
        "run_profile_id": "standard",
        "title": "Standard",
        "runner_defaults": {"temperature": 0, "max_tokens": 256},
        "model_overrides": {"m2": {"max_tokens": 512, "temperature": 1.0}},
        "execution_policy": {"max_concurrency": 2},
        "openclaw": {"agent_id": "helper", "image": "example/openclaw:1", "timeout_seconds": 60},
    })
    write_yaml(configs / "evaluation_profiles" / "judge.yaml", {
        "schema_version": 1,
        "evaluation_profile_id": "judge",
        "title": "Judge",
        "judge_system_prompt_path": "prompts/judge.md",
        "judges": [{"judge_id": "j1", "type": "llm_probe", "model": "openai/gpt-4o-mini"}],
        "judge_runs": [{"judge_run_id": "r1", "judge_id": "j1", "repetitions": 2}],
        "aggregation": {"method": "median", "pass_threshold": 0.5},
    })
    prompts = configs / "evaluation_profiles" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "judge.md").write_text("Grade the run.\r\nReturn JSON.\n", encoding="utf-8")
    agent = configs / "agents" / "helper"
    write_yaml(agent / "agent.yaml", {
        "schema_version": 1,
        "agent_id": "helper",
        "title": "Helper",
        "openclaw": {"agent": {"id": "helper-agent"}, "model_defaults": {"aliases": {"default": "x"}}},
    })
    (agent / "workspace").mkdir()
    (agent / "workspace" / "AGENTS.md").write_text("# Agents\n", encoding="utf-8")
    return root


def _claw_command() -> list[str]:
    # The installed console script beside this interpreter; else the same entry point via -c.
    script = Path(sys.executable).parent / "claw"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "clawstore.cli"]


def claw(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `claw` command in a child process."""
    env = dict(os.environ)
    env.pop("CLAW_STORE", None)
    return subprocess.run([*_claw_command(), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)

