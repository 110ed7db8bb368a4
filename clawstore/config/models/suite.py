"""The suite (`configs/suites/<id>.yaml`): which models run which cases, and with which agents."""

from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from clawstore.config.error_text import got_text
from clawstore.config.models.base import (
    NULL_IS_EMPTY,
    FreeMap,
    Id,
    NonEmptyStr,
    OpenModel,
    SchemaVersion,
    StrictModel,
    StrList,
    TagFilter,
    check_endpoint,
    check_pricing,
    check_text_fields,
    empty_dict,
    empty_list,
    fail,
    none_to_list,
    reject_credential_urls,
    reject_duplicate_ids,
    reject_secrets,
)


class ModelConfig(OpenModel):
    """A model under test. Extra keys (e.g. `openrouter_model`, `primary_params`) pass to the runner."""

    model_id: Id
    label: str | None = None
    requested_model: str | None = None
    provider: str | None = None
    model_name: str | None = None

    @model_validator(mode="after")
    def _no_secrets(self) -> "ModelConfig":
        reject_secrets(self.extras, "name the environment variable with 'api_key_env' instead")
        check_pricing(self.extras)
        check_endpoint(self.extras)
        check_text_fields(self.extras, ("openrouter_model",))
        reject_credential_urls(self.extras, "name the environment variable with 'api_key_env' instead")
        params = self.extras.get("primary_params")
        if params is not None and not isinstance(params, dict):  # (OpenClaw merges it into the agent's: a TypeError)
            raise fail(f"expected a mapping of model parameters, got {got_text(params)}", "primary_params")
        return self

    @property
    def display_name(self) -> str:
        return self.label or self.model_id


class CaseSelection(StrictModel):
    include_case_ids: StrList = Field(default_factory=empty_list)
    exclude_case_ids: StrList = Field(default_factory=empty_list)
    include_tags: TagFilter = Field(default_factory=empty_list)
    exclude_tags: TagFilter = Field(default_factory=empty_list)


class AgentAssignment(StrictModel):
    agent_id: Id
    case_selection: CaseSelection

    @model_validator(mode="after")
    def _has_include(self) -> "AgentAssignment":
        selection = self.case_selection
        if not selection.include_case_ids and not selection.include_tags:
            raise fail("set include_case_ids or include_tags (an assignment must select something)",
                       "case_selection")
        return self


class SuiteOpenClawConfig(StrictModel):
    agent_assignments: Annotated[list[AgentAssignment], BeforeValidator(none_to_list)] = Field(
        default_factory=empty_list)


class Suite(StrictModel):
    schema_version: SchemaVersion
    suite_id: Id
    title: NonEmptyStr
    models: Annotated[list[ModelConfig], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)
    case_selection: Annotated[CaseSelection, NULL_IS_EMPTY] = Field(default_factory=CaseSelection)
    openclaw: Annotated[SuiteOpenClawConfig, NULL_IS_EMPTY] = Field(default_factory=SuiteOpenClawConfig)
    metadata: FreeMap = Field(default_factory=empty_dict)

    @model_validator(mode="after")
    def _unique_model_ids(self) -> "Suite":
        # Two entries with one model_id would share every stored result, so reject them.
        reject_duplicate_ids(self.models, "model_id", "models")
        return self

    @property
    def model_ids(self) -> list[str]:
        return [m.model_id for m in self.models]


__all__ = ["AgentAssignment", "CaseSelection", "ModelConfig", "Suite", "SuiteOpenClawConfig"]
