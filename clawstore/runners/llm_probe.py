"""The llm_probe runner: one chat conversation with an optional, sandboxed tool loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawstore.providers import Endpoint, ProviderClient
from clawstore.runners.artifact import RunArtifact

RUNNER_TYPE = "llm_probe"


@dataclass(frozen=True)
class LlmProbeSpec:
    """Everything one llm_probe run needs, already resolved by the config/graph layers."""

    case_id: str
    requested_model: str
    endpoint: Endpoint
    settings: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    network: bool = False


def run_llm_probe(spec: LlmProbeSpec, client: ProviderClient, sandbox_dir: Path, *,
                  run_id: str | None = None) -> RunArtifact:
    raise NotImplementedError
