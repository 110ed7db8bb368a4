"""The openclaw runner: an OpenClaw agent in a container, its workspace and evidence in the store.

Public API (see docs/openclaw.md):
    agent_workspace_tree(store, agent_dir, agent) -> oid
    resolve_image_digest(image, docker_cli) -> str | None
    openclaw_identity(spec) -> dict
    openclaw_legacy_identity(spec) -> dict | None
    openclaw_earlier_identity(spec) -> dict | None
    run_openclaw(spec, store, workdir) -> OpenClawOutcome
"""

from clawstore.runners.openclaw.image import resolve_image_digest
from clawstore.runners.openclaw.runner import (
    RUNNER_TYPE,
    OpenClawOutcome,
    OpenClawSpec,
    openclaw_earlier_identity,
    openclaw_identity,
    openclaw_legacy_identity,
    run_openclaw,
)
from clawstore.runners.openclaw.workspace import agent_workspace_tree

__all__ = [
    "RUNNER_TYPE",
    "OpenClawOutcome",
    "OpenClawSpec",
    "agent_workspace_tree",
    "openclaw_earlier_identity",
    "openclaw_identity",
    "openclaw_legacy_identity",
    "resolve_image_digest",
    "run_openclaw",
]
