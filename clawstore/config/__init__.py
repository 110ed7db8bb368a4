"""The config layer: models of the five config types, workspace loading and campaign expansion.

Other layers call `load_workspace` (validation, catalog) and `resolve_campaign` (what to build).
"""

from clawstore.config.campaign import Campaign, CampaignItem, resolve_campaign
from clawstore.config.ids import DIMENSIONS, ID_PATTERN, KNOWN_TOOLS, RUN_STATUSES
from clawstore.config.issues import ConfigIssue
from clawstore.config.messages import Attachment, ResolvedMessage, case_path, inject_attachments
from clawstore.config.models import (
    Agent,
    AggregationConfig,
    AnchorsConfig,
    CaseSelection,
    DeclarativeCheck,
    DeterministicCheck,
    EvaluationProfile,
    ExecutionPolicy,
    Expectation,
    Expectations,
    JudgeConfig,
    JudgeRunConfig,
    Message,
    MessageSource,
    ModelConfig,
    OpenClawRunProfile,
    PythonHook,
    Rubric,
    RunProfile,
    SecurityPolicy,
    Suite,
    TestCase,
)
from clawstore.config.references import find_workspace_root
from clawstore.config.resolution import (
    merge_runner_settings,
    openclaw_model_ref,
    resolve_judge_model,
    resolve_judge_prompt,
    resolve_model,
)
from clawstore.config.selection import select_case_ids
from clawstore.config.workspace import Loaded, LoadedAgent, LoadedCase, Workspace, load_workspace

__all__ = [
    "DIMENSIONS", "ID_PATTERN", "KNOWN_TOOLS", "RUN_STATUSES",
    "Agent", "AggregationConfig", "AnchorsConfig", "Attachment", "Campaign", "CampaignItem", "CaseSelection",
    "ConfigIssue", "DeclarativeCheck", "DeterministicCheck", "EvaluationProfile", "ExecutionPolicy",
    "Expectation", "Expectations", "JudgeConfig", "JudgeRunConfig", "Loaded", "LoadedAgent", "LoadedCase",
    "Message", "MessageSource", "ModelConfig", "OpenClawRunProfile", "PythonHook", "ResolvedMessage",
    "Rubric", "RunProfile", "SecurityPolicy", "Suite", "TestCase", "Workspace",
    "case_path", "find_workspace_root", "inject_attachments", "load_workspace", "merge_runner_settings",
    "openclaw_model_ref", "resolve_campaign", "resolve_judge_model", "resolve_judge_prompt", "resolve_model",
    "select_case_ids",
]
