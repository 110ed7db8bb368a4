"""Evaluation library: deterministic checks, python hooks, the LLM judge and aggregation.

Pure functions over explicit inputs (RunArtifact dict, captured files, config specs); no store and
no caching here: the build layer turns each step into a node with its own key. See
docs/evaluation.md for the semantics.
"""

from importlib import resources

from clawstore.evaluate.aggregate import METHODS, FinalResult, aggregate, threshold_score
from clawstore.evaluate.checks import CHECKS_FORMAT_VERSION, dimension_scores, evaluate_checks, summarize
from clawstore.evaluate.evidence import (
    DIMENSIONS,
    DictSandboxFiles,
    DictWorkspaceFiles,
    SandboxFiles,
    WorkspaceFiles,
)
from clawstore.evaluate.hooks import DEFAULT_HOOK_TIMEOUT_S, network_isolation_prefix, run_python_hook
from clawstore.evaluate.inputs import check_inputs
from clawstore.evaluate.judge import (
    DEFAULT_JUDGE_ATTEMPTS,
    INFRASTRUCTURE_STATUSES,
    JudgeIteration,
    build_judge_request,
    resolve_judge_model,
    run_judge_iteration,
)
from clawstore.evaluate.judge_contract import JudgeContractError, JudgeScores, parse_judge_response
from clawstore.evaluate.judge_evidence import build_judge_evidence
from clawstore.evaluate.judge_prompt import JUDGE_PROMPT_FORMAT_VERSION, JudgeTarget, render_judge_prompt
from clawstore.evaluate.redact import redact_text, redact_value
from clawstore.evaluate.summary_md import render_result_summary_md


def default_judge_system_prompt() -> str:
    """clawstore's own default judge system prompt (used when a profile names none)."""
    return resources.files(__name__).joinpath("judge_system_default.md").read_text(encoding="utf-8")


__all__ = [
    "CHECKS_FORMAT_VERSION",
    "DEFAULT_HOOK_TIMEOUT_S",
    "DEFAULT_JUDGE_ATTEMPTS",
    "DIMENSIONS",
    "INFRASTRUCTURE_STATUSES",
    "JUDGE_PROMPT_FORMAT_VERSION",
    "METHODS",
    "DictSandboxFiles",
    "DictWorkspaceFiles",
    "FinalResult",
    "JudgeContractError",
    "JudgeIteration",
    "JudgeScores",
    "JudgeTarget",
    "SandboxFiles",
    "WorkspaceFiles",
    "aggregate",
    "build_judge_evidence",
    "build_judge_request",
    "check_inputs",
    "default_judge_system_prompt",
    "dimension_scores",
    "evaluate_checks",
    "network_isolation_prefix",
    "parse_judge_response",
    "redact_text",
    "redact_value",
    "render_judge_prompt",
    "render_result_summary_md",
    "resolve_judge_model",
    "run_judge_iteration",
    "run_python_hook",
    "summarize",
    "threshold_score",
]
