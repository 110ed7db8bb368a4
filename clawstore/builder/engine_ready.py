"""A build refuses, before anything runs, when the container engine cannot start the OpenClaw runs it would execute
(docs/openclaw.md, "The engine is part of every run's key"): no engine in this shell, its daemon down, the image not
loaded. Before session 80 each run failed `openclaw_engine_unavailable`, and that failed build became the campaign's
head.
The engine is asked as the runner asks it (runners/openclaw/container.py `engine_problem`), once a build; the runner
still asks again before its containers (an engine gone mid-build fails the run, retryable)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawstore.errors import ConfigError

if TYPE_CHECKING:
    from clawstore.config.campaign import Campaign
    from clawstore.graph.plan import Node


class EngineUnavailable(ConfigError):
    """The run profile's image cannot be run here (exit 2): its file and field, the engine's words, the fix."""


def runs_openclaw(node: Node, fresh: bool, force: bool) -> bool:
    """Is `node` an OpenClaw run a build would execute (not fresh, or --force)?"""
    item = node.item
    return node.kind == "run" and item is not None and item.runner_type == "openclaw" and (force or not fresh)


def has_openclaw(campaign: Campaign) -> bool:
    return campaign.run_profile.openclaw is not None and any(
        c.runner_type == "openclaw" for c in campaign.items.cases)


def engine_refusal(campaign: Campaign) -> EngineUnavailable | None:
    """Why the campaign's OpenClaw runs cannot start in this environment, or None when they can (the engine asked now:
    `docker image inspect`, one process). The engine's text is masked as the runner masks it: the credential its
    address carries (`DOCKER_HOST=tcp://user:password@host`) replaced, the address shown with `***` in its place."""
    from clawstore.runners.openclaw.container import (
        ENGINE_VARS,
        EngineSettings,
        engine_address_shown,
        engine_env,
        engine_problem,
        engine_secrets,
    )
    from clawstore.runners.openclaw.evidence import redact

    block = campaign.run_profile.openclaw
    if block is None:
        return None
    problem = engine_problem(EngineSettings.from_env(block.docker_cli), block.image)
    if problem is None:
        return None
    engine = engine_env()
    problem = redact(problem, sorted(engine_secrets(engine), key=len, reverse=True))
    asked = ", ".join(f"{name}={engine_address_shown(engine[name])}" for name in ENGINE_VARS if name in engine)
    where = asked or f"DOCKER_HOST unset: the default engine of '{block.docker_cli}'"
    field = "openclaw.docker_cli" if problem.startswith("container CLI ") else "openclaw.image"
    path = campaign.run_profile_path
    shown = path.relative_to(campaign.root).as_posix() if path.is_relative_to(campaign.root) else path.as_posix()
    others = any(c.runner_type != "openclaw" for c in campaign.items.cases)
    return EngineUnavailable(
        f"the build's OpenClaw runs cannot start: {problem} (engine asked: {where}). Start the engine, set "
        f"DOCKER_HOST to it in this shell, or load the image into it, then build again"
        + (" (--case builds the campaign's other cases alone)" if others else ""), shown, field)


class EngineCheck:
    """A build's: refuses at the first window with an OpenClaw run to execute (beside `require_keys`, where a key
    missing is refused), the engine asked once a build."""

    def __init__(self, campaign: Campaign, force: bool):
        self.campaign = campaign
        self.force = force
        self.asked = False

    def require(self, nodes: list[Node]) -> None:
        if self.asked or not any(runs_openclaw(node, node.fresh, self.force) for node in nodes):
            return
        self.asked = True
        refused = engine_refusal(self.campaign)
        if refused is not None:
            raise refused
