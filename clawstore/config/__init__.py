"""The config layer: models of the five config types, workspace loading and campaign expansion.

Other layers call `load_workspace` (validation, catalog) and `resolve_campaign` (what to build).
Imports are lazy (PEP 562): importing one name loads only its module, so a command that needs no
config model (a no-op build answered from its stamp) does not pay for building them.
"""

from typing import TYPE_CHECKING

from clawstore.values.lazy_names import lazy_names

_WHERE = {
    "Campaign": "campaign",
    "CampaignItem": "campaign",
    "resolve_campaign": "campaign",
    "DIMENSIONS": "ids",
    "ID_PATTERN": "ids",
    "KNOWN_TOOLS": "ids",
    "RUN_STATUSES": "ids",
    "ConfigIssue": "issues",
    "Attachment": "messages",
    "ResolvedMessage": "messages",
    "case_path": "messages",
    "inject_attachments": "messages",
    "Agent": "models",
    "AggregationConfig": "models",
    "AnchorsConfig": "models",
    "CaseSelection": "models",
    "DeclarativeCheck": "models",
    "DeterministicCheck": "models",
    "EvaluationProfile": "models",
    "ExecutionPolicy": "models",
    "Expectation": "models",
    "Expectations": "models",
    "JudgeConfig": "models",
    "JudgeRunConfig": "models",
    "Message": "models",
    "MessageSource": "models",
    "ModelConfig": "models",
    "OpenClawRunProfile": "models",
    "PythonHook": "models",
    "Rubric": "models",
    "RunProfile": "models",
    "SecurityPolicy": "models",
    "Suite": "models",
    "TestCase": "models",
    "find_workspace_root": "references",
    "merge_runner_settings": "resolution",
    "openclaw_model_ref": "resolution",
    "resolve_judge_model": "resolution",
    "resolve_judge_prompt": "resolution",
    "resolve_model": "resolution",
    "select_case_ids": "selection",
    "Loaded": "catalog",
    "LoadedAgent": "catalog",
    "LoadedCase": "catalog",
    "Workspace": "catalog",
    "load_workspace": "workspace",
}


__getattr__ = lazy_names(__name__, _WHERE)


if TYPE_CHECKING:
    from clawstore.config.campaign import Campaign, CampaignItem, resolve_campaign
    from clawstore.config.catalog import Loaded, LoadedAgent, LoadedCase, Workspace
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
    from clawstore.config.workspace import load_workspace

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
