"""The test case (`configs/cases/**/test.yaml`): one scenario, reusable across suites and models."""

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from clawstore.config.ids import KNOWN_TOOLS
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
    reject_duplicate_ids,
)
from clawstore.config.models.checks import DeterministicCheck
from clawstore.config.models.runner_settings import check_settings
from clawstore.errors import quoted
from clawstore.values.workspace_paths import workspace_path_problem


class MessageSource(StrictModel):
    path: NonEmptyStr
    format: Literal["yaml", "json"] | None = None


class Message(StrictModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    source: MessageSource | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _content_xor_source(self) -> "Message":
        if self.content is not None and self.source is not None:
            raise fail("set either 'content' or 'source', not both")
        if self.content is None and self.source is None:
            raise fail("set one of 'content' or 'source'")
        return self


MessageList = Annotated[list[Message], BeforeValidator(none_to_list)]


class RunnerConfig(OpenModel):
    """`type` plus case-level runner settings (every other key), which win over the run profile's."""

    type: Literal["llm_probe", "openclaw"]

    @model_validator(mode="after")
    def _settings(self) -> "RunnerConfig":
        check_settings(self.extras)
        return self

    @property
    def settings(self) -> dict[str, Any]:
        return self.extras


def _check_context(context: dict[str, Any]) -> dict[str, Any]:
    probe = context.get("llm_probe")
    if probe is not None:
        if not isinstance(probe, dict):
            raise fail(f"expected a mapping, got {type(probe).__name__}", "llm_probe")
        tools = probe.get("tools")
        if tools is not None:
            if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
                raise fail("expected a list of tool names", "llm_probe.tools")
            for index, tool in enumerate(tools):
                if tool not in KNOWN_TOOLS:
                    raise fail(f"unknown tool {quoted(tool)} (known: {', '.join(KNOWN_TOOLS)})",
                               f"llm_probe.tools[{index}]")
        choice = probe.get("tool_choice")
        if choice is not None and not isinstance(choice, str | dict):
            raise fail("expected a string or a mapping", "llm_probe.tool_choice")
    hints = context.get("openclaw")
    if hints is not None:
        if not isinstance(hints, dict):
            raise fail(f"expected a mapping, got {type(hints).__name__}", "openclaw")
        artifact = hints.get("expected_artifact")
        if artifact is not None and not (
            isinstance(artifact, str) or (isinstance(artifact, list) and all(isinstance(a, str) for a in artifact))
        ):
            raise fail("expected a file name or a list of file names", "openclaw.expected_artifact")
        # A path out of the workspace names no file a run can leave: its key output would be missing without a word.
        for index, path in enumerate(artifact if isinstance(artifact, list) else [artifact] if artifact is not None
                                     else []):
            if (why := workspace_path_problem(path)) is not None:
                raise fail(why, "openclaw.expected_artifact" + (f"[{index}]" if isinstance(artifact, list) else ""))
    return context


class TestInput(StrictModel):
    __test__ = False  # not a pytest class

    messages: MessageList = Field(default_factory=empty_list)
    turns: MessageList = Field(default_factory=empty_list)
    attachments: Annotated[list[NonEmptyStr], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)
    context: FreeMap = Field(default_factory=empty_dict)

    @field_validator("context")
    @classmethod
    def _context(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_context(value)

    @property
    def llm_probe_tools(self) -> list[str]:
        """Enabled llm_probe tools, de-duplicated, in the order written."""
        probe = self.context.get("llm_probe") or {}
        return list(dict.fromkeys(probe.get("tools") or []))


class Expectation(StrictModel):
    text: NonEmptyStr
    weight: float = 1.0
    metadata: FreeMap = Field(default_factory=empty_dict)


class Expectations(StrictModel):
    hard_expectations: Annotated[list[Expectation], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)
    soft_expectations: Annotated[list[Expectation], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)


def _anchor_keys(value: Any) -> Any:
    # YAML reads an unquoted `10:` key as a number; anchors are score labels, so accept it.
    if isinstance(value, dict):
        return {(str(k) if isinstance(k, int | float) and not isinstance(k, bool) else k): v
                for k, v in value.items()}
    return {} if value is None else value


class RubricScale(StrictModel):
    min: Annotated[float, Field(ge=0)] = 0
    max: Annotated[float, Field(ge=0)] = 10
    anchors: Annotated[dict[str, str], BeforeValidator(_anchor_keys)] = Field(default_factory=empty_dict)

    @model_validator(mode="after")
    def _ordered(self) -> "RubricScale":
        if self.max <= self.min:
            raise fail(f"must be greater than min ({self.min:g}), got {self.max:g}", "max")
        return self


class RubricCriterion(StrictModel):
    name: NonEmptyStr
    what_good_looks_like: NonEmptyStr
    what_bad_looks_like: NonEmptyStr


class Rubric(StrictModel):
    version: Literal[1] = 1
    scale: Annotated[RubricScale, NULL_IS_EMPTY] = Field(default_factory=RubricScale)
    criteria: Annotated[list[RubricCriterion], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)
    scoring_instructions: str | None = None


class TestCase(StrictModel):
    __test__ = False  # not a pytest class

    schema_version: SchemaVersion
    case_id: Id
    title: NonEmptyStr
    runner: RunnerConfig
    input: TestInput
    expectations: Annotated[Expectations, NULL_IS_EMPTY] = Field(default_factory=Expectations)
    rubric: Rubric | None = None
    deterministic_checks: Annotated[list[DeterministicCheck], BeforeValidator(none_to_list)] = Field(
        default_factory=empty_list)
    tags: Tags = Field(default_factory=empty_list)
    metadata: FreeMap = Field(default_factory=empty_dict)

    @model_validator(mode="after")
    def _unique_check_ids(self) -> "TestCase":
        reject_duplicate_ids(self.deterministic_checks, "check_id", "deterministic_checks")
        return self

    @property
    def runner_type(self) -> str:
        return self.runner.type


__all__ = [
    "Expectation", "Expectations", "Message", "MessageSource", "Rubric", "RubricCriterion", "RubricScale",
    "RunnerConfig", "TestCase", "TestInput",
]
