"""The generated `openclaw.json` (shape: docs/openclaw.md): one primary model, no fallbacks, and no secret in the file.

Differences from the reference, on purpose: docs/openclaw.md (Details by module)."""

from __future__ import annotations

import copy
import json
from typing import Any

from clawstore.runners.pricing import PRICE_KEYS, pricing

WORKSPACE_IN_CONTAINER = "/work/workspace"
# The one variable the container gets the provider key in. OpenClaw and its plugins act on well-known
# names: 2026.9.6 takes OPENROUTER_API_KEY as a configured perplexity plugin and npm-installs it.
CONTAINER_KEY_ENV = "CLAWSTORE_PROVIDER_API_KEY"
PROVIDER_ID = "openrouter"
DEFAULT_MAX_TOKENS = 16384
CONTEXT_WINDOW = 200000
_REASONING_HINTS = ("reason", "thinking", "minimax")


class OpenClawConfigError(ValueError):
    """The generated config would be unusable (the reference's pre-write validation)."""


def agent_fragments(agent: Any) -> dict[str, Any]:
    """The agent's `openclaw` block as plain dicts, from the Agent model or its dict dump."""
    if hasattr(agent, "model_dump"):
        agent = agent.model_dump(mode="json")
    block = dict((agent or {}).get("openclaw") or {})
    defaults = dict(block.get("model_defaults") or {})
    return {
        "agent_id": (agent or {}).get("agent_id"),
        "agents_defaults": dict(block.get("agents_defaults") or {}),
        "agent": dict(block.get("agent") or {}),
        "aliases": dict(defaults.get("aliases") or {}),
        "primary_params": dict(defaults.get("primary_params") or {}),
    }


def cli_agent_id(agent: Any) -> str:
    """`openclaw.agent.id` (trimmed) when set, else the directory agent_id."""
    fragments = agent_fragments(agent)
    fragment_id = fragments["agent"].get("id")
    if isinstance(fragment_id, str) and fragment_id.strip():
        return fragment_id.strip()
    return str(fragments["agent_id"])


def model_ref(requested_model: str) -> str:
    return requested_model if requested_model.startswith(f"{PROVIDER_ID}/") else f"{PROVIDER_ID}/{requested_model}"


def provider_model_id(requested_model: str) -> str:
    return model_ref(requested_model)[len(PROVIDER_ID) + 1:]


def primary_params(agent: Any, model_extras: dict[str, Any]) -> dict[str, Any]:
    """Agent `model_defaults.primary_params` updated by the suite model's (suite wins per key)."""
    merged = dict(agent_fragments(agent)["primary_params"])
    merged.update(dict(model_extras.get("primary_params") or {}))
    return merged


def _reasoning(params: dict[str, Any], model_id: str) -> bool:
    flag = params.get("reasoning")
    if isinstance(flag, bool):
        return flag
    if isinstance(flag, dict):
        return True
    return any(hint in model_id.lower() for hint in _REASONING_HINTS)


def _max_tokens(params: dict[str, Any]) -> int:
    value = params.get("max_tokens")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return DEFAULT_MAX_TOKENS


def render_config(agent: Any, requested_model: str, model_extras: dict[str, Any], base_url: str,
                  api_key_env: str | None) -> dict[str, Any]:
    """The openclaw.json document for one run (validated; raises OpenClawConfigError)."""
    fragments = agent_fragments(agent)
    ref = model_ref(requested_model)
    model_id = provider_model_id(requested_model)
    params = primary_params(agent, model_extras)
    alias = next((v for v in fragments["aliases"].values() if isinstance(v, str) and v.strip()), "default")

    defaults = copy.deepcopy(fragments["agents_defaults"])
    if isinstance(defaults.get("sandbox"), str):
        # OpenClaw's own sandbox would need a container engine inside ours: the container is the sandbox.
        defaults["sandbox"] = {"mode": "off"}
    model_entry: dict[str, Any] = {"alias": alias}
    if params:
        model_entry["params"] = params
    defaults.update({"workspace": WORKSPACE_IN_CONTAINER, "model": {"primary": ref},
                     "models": {ref: model_entry}})

    listed = copy.deepcopy(fragments["agent"])
    listed["id"] = cli_agent_id(agent)
    listed.pop("prompt", None)  # in AGENTS.md instead (workspace.agent_workspace_tree)
    listed["model"] = ref

    prices = pricing(model_extras) or dict.fromkeys(PRICE_KEYS, 0)
    config = {
        "agents": {"defaults": defaults, "list": [listed]},
        "models": {"mode": "merge", "providers": {PROVIDER_ID: {
            "baseUrl": base_url.rstrip("/"),
            "apiKey": f"${{{CONTAINER_KEY_ENV}}}" if api_key_env else "no-key",
            "api": "openai-completions",
            "models": [{"id": model_id, "name": model_id, "reasoning": _reasoning(params, model_id),
                        "input": ["text", "image"], "cost": prices, "contextWindow": CONTEXT_WINDOW,
                        "maxTokens": _max_tokens(params)}],
        }}},
        "plugins": {"enabled": False},
    }
    validate_config(config)
    return config


def validate_config(config: dict[str, Any]) -> None:
    agents = config.get("agents") or {}
    defaults = agents.get("defaults") or {}
    listed = agents.get("list") or []
    if not defaults.get("workspace"):
        raise OpenClawConfigError("agents.defaults.workspace is empty")
    if len(listed) != 1 or not listed[0].get("model"):
        raise OpenClawConfigError("agents.list must hold exactly one agent with a model")
    if (defaults.get("model") or {}).get("primary") != listed[0]["model"]:
        raise OpenClawConfigError("agents.defaults.model.primary differs from agents.list[0].model")


def config_bytes(config: dict[str, Any]) -> bytes:
    """Deterministic file bytes: indent 2, sorted keys, trailing newline."""
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8")
