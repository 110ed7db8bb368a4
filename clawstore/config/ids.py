"""Identifier rules and the closed vocabularies the config schema uses."""

from __future__ import annotations

import re

ID_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
ID_RE = re.compile(ID_PATTERN)
ID_HINT = "lowercase letters, digits, '_' or '-'"

# Judge scoring dimensions, in the order reports show them.
DIMENSIONS: tuple[str, ...] = ("task", "process", "autonomy", "closeness", "efficiency", "spark")

RUNNER_TYPES: tuple[str, ...] = ("llm_probe", "openclaw")
MESSAGE_ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
# Terminal statuses a run can end in (status_is checks compare against these).
RUN_STATUSES: tuple[str, ...] = ("success", "invalid", "incomplete", "provider_error", "timed_out", "failed")
# Tools the llm_probe runner implements; naming any other tool is a config error, not a silent drop.
KNOWN_TOOLS: tuple[str, ...] = ("exec_shell", "read_file", "write_file", "web_search")
AGGREGATION_METHODS: tuple[str, ...] = ("median", "mean", "majority_vote", "all_pass")
# Keys that would let an agent pick its own model; the benchmark model always comes from the suite.
FORBIDDEN_AGENT_MODEL_KEYS: tuple[str, ...] = (
    "default_model", "model", "model_id", "primary_model", "requested_model",
)
# Workspace files the openclaw runner fills with placeholders when a template lacks them.
STANDARD_AGENT_FILES: tuple[str, ...] = ("AGENTS.md", "IDENTITY.md", "SOUL.md", "TOOLS.md", "USER.md")


def is_id(value: object) -> bool:
    # fullmatch: `$` alone also matches before a final newline ("m1\n" was an id)
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None
