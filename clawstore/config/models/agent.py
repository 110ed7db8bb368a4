"""The OpenClaw agent (`configs/agents/<agent_id>/agent.yaml` + `workspace/`)."""

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from clawstore.config.error_text import got_text, unquoted_hint
from clawstore.config.ids import FORBIDDEN_AGENT_MODEL_KEYS
from clawstore.config.models.base import (
    NULL_IS_EMPTY,
    FreeMap,
    Id,
    NonEmptyStr,
    OpenModel,
    SchemaVersion,
    StrictModel,
    Tags,
    empty_dict,
    empty_list,
    fail,
    none_to_list,
    reject_credential_urls,
)


def _no_model_keys(fragment: dict[str, Any]) -> dict[str, Any]:
    for key in fragment:
        if key in FORBIDDEN_AGENT_MODEL_KEYS:
            raise fail(f"'{key}' is not allowed here: the benchmark model always comes from the suite", key)
    return fragment


class ModelDefaults(OpenModel):
    fallbacks: Annotated[list[Any], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)
    aliases: Annotated[dict[str, str], BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=empty_dict)
    primary_params: FreeMap = Field(default_factory=empty_dict)

    @model_validator(mode="after")
    def _single_model(self) -> "ModelDefaults":
        if self.fallbacks:
            raise fail("must be empty: a benchmark run uses exactly one model", "fallbacks")
        _no_model_keys(self.extras)
        return self


class AgentOpenClawConfig(StrictModel):
    identity: FreeMap = Field(default_factory=empty_dict)
    agents_defaults: FreeMap = Field(default_factory=empty_dict)
    agent: FreeMap = Field(default_factory=empty_dict)
    model_defaults: Annotated[ModelDefaults, NULL_IS_EMPTY] = Field(default_factory=ModelDefaults)

    @model_validator(mode="after")
    def _no_credential_urls(self) -> "AgentOpenClawConfig":
        # (the agent's config is stored with its every run: a key belongs in the environment OpenClaw is given)
        reject_credential_urls(self.model_dump(mode="json"), "the agent's config is stored with every run")
        return self

    @field_validator("agents_defaults", "agent")
    @classmethod
    def _fragments(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _no_model_keys(value)

    @field_validator("agent")
    @classmethod
    def _text_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        # claw reads these two as text: a number or a list was passed over without a word (the prompt never reached
        # AGENTS.md, the id fell back to the directory's), so every run went out with an agent not the one written.
        for key in ("id", "prompt"):
            if value.get(key) is not None and not isinstance(value[key], str):
                raise fail(f"expected a string, got {got_text(value[key])}{unquoted_hint(value[key])}", key)
        return value


class Agent(StrictModel):
    schema_version: SchemaVersion
    agent_id: Id
    title: NonEmptyStr
    description: str | None = None
    tags: Tags = Field(default_factory=empty_list)
    metadata: FreeMap = Field(default_factory=empty_dict)
    openclaw: Annotated[AgentOpenClawConfig, NULL_IS_EMPTY] = Field(default_factory=AgentOpenClawConfig)

    @property
    def cli_agent_id(self) -> str:
        """The id passed to `openclaw agent --agent`: `openclaw.agent.id` when set, else agent_id."""
        fragment_id = self.openclaw.agent.get("id")
        if isinstance(fragment_id, str) and fragment_id.strip():
            return fragment_id.strip()
        return self.agent_id


__all__ = ["Agent", "AgentOpenClawConfig", "ModelDefaults"]
