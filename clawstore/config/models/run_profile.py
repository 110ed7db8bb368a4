"""The run profile (`configs/run_profiles/<id>.yaml`): how runs execute."""

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from clawstore.config.ids import is_id
from clawstore.config.limits import MAX_CONCURRENCY, MAX_RUN_REPETITIONS, MAX_TIMEOUT_SECONDS
from clawstore.config.models.base import (
    NULL_IS_EMPTY,
    FreeMap,
    Id,
    NonEmptyStr,
    SchemaVersion,
    StrictModel,
    empty_dict,
    fail,
)
from clawstore.config.models.runner_settings import check_settings
from clawstore.errors import quoted

RunnerSettings = Annotated[FreeMap, AfterValidator(check_settings)]


def _none_to_dict(value: Any) -> Any:
    return {} if value is None else value


class ExecutionPolicy(StrictModel):
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 1
    run_repetitions: Annotated[int, Field(ge=1, le=MAX_RUN_REPETITIONS)] = 1
    fail_fast: bool = False
    stop_on_runner_error: bool = True


class OpenClawRunProfile(StrictModel):
    agent_id: Id
    image: NonEmptyStr
    timeout_seconds: Annotated[int, Field(gt=0, le=MAX_TIMEOUT_SECONDS)]
    docker_cli: NonEmptyStr = "docker"

    @field_validator("image")
    @classmethod
    def _image_reference(cls, image: str) -> str:
        # The engine's command line takes the image among its options (`run ... <image> openclaw ...`): one starting
        # with '-' was read as another option, and a space or line break is in no reference an engine can pull.
        if image.startswith("-") or any(c.isspace() or not c.isprintable() for c in image):
            raise fail(f"expected an OCI image reference such as ghcr.io/openclaw/openclaw:2026.4.15 (no spaces, not "
                       f"starting with '-'), got {quoted(image)}")
        return image


class RunProfile(StrictModel):
    schema_version: SchemaVersion
    run_profile_id: Id
    title: NonEmptyStr
    runner_defaults: RunnerSettings = Field(default_factory=empty_dict)
    model_overrides: Annotated[dict[str, RunnerSettings], BeforeValidator(_none_to_dict)] = Field(
        default_factory=empty_dict)
    execution_policy: Annotated[ExecutionPolicy, NULL_IS_EMPTY] = Field(default_factory=ExecutionPolicy)
    openclaw: OpenClawRunProfile | None = None

    @model_validator(mode="after")
    def _override_keys(self) -> "RunProfile":
        for key in self.model_overrides:
            if not is_id(key):
                raise fail(f"model_overrides keys are model_ids; {quoted(key)} is not a valid model_id",
                           f"model_overrides.{key}")
        return self


__all__ = ["ExecutionPolicy", "OpenClawRunProfile", "RunProfile"]
