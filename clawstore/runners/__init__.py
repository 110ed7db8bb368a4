"""Runners execute one run and return its RunArtifact; they never decide caching.

Public API:
    LlmProbeSpec(case_id, requested_model, endpoint, settings, messages, tools, tool_choice, network)
    run_llm_probe(spec, client, sandbox_dir, *, run_id=None) -> RunArtifact
    RunArtifact(...).to_json() -> dict, RunArtifact.from_json(dict), RunError, Trace
    TOOL_NAMES: the tools llm_probe knows (unknown names in a case are dropped)

llm_probe and tools (and httpx with them) are imported on first use: the package is imported for its pricing by
every build, whose dry run, explain or status never runs a probe (~60 ms of their start: httpx, h11, the client).
"""

from __future__ import annotations

import importlib
from typing import Any

from clawstore.runners.artifact import RUN_STATUSES, RunArtifact, RunError, Trace

# name -> (module, its name there)
_ON_FIRST_USE = {"LLM_PROBE": ("llm_probe", "RUNNER_TYPE"), "LlmProbeSpec": ("llm_probe", "LlmProbeSpec"),
                 "run_llm_probe": ("llm_probe", "run_llm_probe"), "TOOL_NAMES": ("tools", "TOOL_NAMES")}


def __getattr__(name: str) -> Any:
    if name in _ON_FIRST_USE:
        module, attribute = _ON_FIRST_USE[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
