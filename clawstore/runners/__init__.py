"""Runners execute one run and return its RunArtifact; they never decide caching.

Public API:
    LlmProbeSpec(case_id, requested_model, endpoint, settings, messages, tools, tool_choice, network)
    run_llm_probe(spec, client, sandbox_dir, *, run_id=None) -> RunArtifact
    RunArtifact(...).to_json() -> dict, RunArtifact.from_json(dict), RunError, Trace
    TOOL_NAMES: the tools llm_probe knows (unknown names in a case are dropped)
"""

from clawstore.runners.artifact import RUN_STATUSES, RunArtifact, RunError, Trace
from clawstore.runners.llm_probe import RUNNER_TYPE as LLM_PROBE
from clawstore.runners.llm_probe import LlmProbeSpec, run_llm_probe
from clawstore.runners.tools import TOOL_NAMES

__all__ = [
    "LLM_PROBE",
    "RUN_STATUSES",
    "TOOL_NAMES",
    "LlmProbeSpec",
    "RunArtifact",
    "RunError",
    "Trace",
    "run_llm_probe",
]
