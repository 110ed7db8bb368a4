"""The evaluation profile (`configs/evaluation_profiles/<id>.yaml`): judges and how they are combined."""

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from clawstore.config.error_text import got_text
from clawstore.config.limits import MAX_JUDGE_REPETITIONS, MAX_SAMPLE_SIZE
from clawstore.config.models.base import (
    NULL_IS_EMPTY,
    FreeMap,
    Id,
    NonEmptyStr,
    OpenModel,
    SchemaVersion,
    StrictModel,
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
from clawstore.config.models.runner_settings import JUDGE_ATTEMPTS_RULE, SETTING_RULES
from clawstore.values.judge_options import JUDGE_OWN_FIELDS, RESERVED_REQUEST_KEYS

REQUEST_SETTINGS = ("temperature", "top_p", "max_tokens", "seed")


class JudgeConfig(OpenModel):
    """A judge. `request_options` and every extra field clawstore does not read itself go to the provider request."""

    judge_id: Id
    type: NonEmptyStr
    model: str | None = None
    request_options: FreeMap = Field(default_factory=empty_dict)

    @model_validator(mode="after")
    def _no_secrets(self) -> "JudgeConfig":
        hint = "the judge's key comes from the environment"
        reject_secrets(self.extras, hint)
        reject_secrets(self.request_options, hint, "request_options.")
        check_pricing(self.extras)
        check_endpoint(self.extras)
        check_text_fields(self.extras, ("judge_model", "model_id"))
        # (read by the build as the judge's transport: a wrong one failed every judgement after the runs were paid)
        for key in ("timeout_seconds", "retries"):
            if self.extras.get(key) is not None and (problem := SETTING_RULES[key](self.extras[key])):
                raise fail(problem, key)
        # (`attempts: two` failed the build after its runs were paid, `attempts: 0` became 3 without a word)
        if self.extras.get("attempts") is not None and (problem := JUDGE_ATTEMPTS_RULE(self.extras["attempts"])):
            raise fail(problem, "attempts")
        # (request settings the runner settings share, as the provider reads them: a wrong one failed every judgement,
        # or, a temperature, became 0.0 without a word)
        for where, prefix in ((self.extras, ""), (self.request_options, "request_options.")):
            for key in REQUEST_SETTINGS:
                if key in where and (problem := SETTING_RULES[key](where[key])):
                    raise fail(problem, prefix + key)
            if where.get("stream") not in (None, False):  # (each judgement streamed, paid for, then unreadable)
                raise fail(f"claw reads the judge's reply whole: stream must be false or left out, got "
                           f"{got_text(where['stream'])}", prefix + "stream")
        reject_credential_urls(self.extras, hint)
        reject_credential_urls(self.request_options, hint, "request_options.")
        # (refused here, not only at the judgement, which came after the runs were paid for: each an error, exit 1)
        for key in RESERVED_REQUEST_KEYS:
            for where, field in ((self.request_options, f"request_options.{key}"), (self.extras, key)):
                if key in where:  # (an extra field is a request option too)
                    raise fail(f"'{key}' is the judge's own (its 'model' and the prompt it is sent): not a request "
                               "option", field)
        for key in self.extras:
            if key not in JUDGE_OWN_FIELDS and key in self.request_options:
                raise fail(f"'{key}' is given twice: as a judge field and in request_options (both are sent)", key)
        batch = self.extras.get("batch")
        if batch is not None and not isinstance(batch, bool):  # (`batch: "yes"` was no batch, without a word)
            raise fail(f"expected true or false, got {got_text(batch)}", "batch")
        return self


class JudgeRunConfig(StrictModel):
    judge_run_id: Id
    judge_id: Id
    repetitions: Annotated[int, Field(ge=1, le=MAX_JUDGE_REPETITIONS)] = 1
    sample_size: Annotated[int, Field(ge=1, le=MAX_SAMPLE_SIZE)] | None = None

    @model_validator(mode="after")
    def _sample_fits(self) -> "JudgeRunConfig":
        if self.sample_size is not None and self.sample_size > self.repetitions:
            raise fail(f"must be <= repetitions ({self.repetitions}), got {self.sample_size}", "sample_size")
        return self


class AggregationConfig(StrictModel):
    method: Literal["median", "mean", "majority_vote", "all_pass"] = "median"
    pass_threshold: Annotated[float, Field(ge=0, le=1)] | None = None


class AnchorReference(StrictModel):
    anchor_id: Id
    label: str
    text: str


class AnchorsConfig(StrictModel):
    enabled: bool = False
    references: Annotated[list[AnchorReference], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)


class SecurityPolicy(StrictModel):
    allow_local_python_hooks: bool = False
    network_access: Literal["deny", "allow"] = "deny"
    redact_secrets: bool = True


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


class EvaluationProfile(StrictModel):
    schema_version: SchemaVersion
    evaluation_profile_id: Id
    title: NonEmptyStr
    judges: Annotated[list[JudgeConfig], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)
    judge_runs: Annotated[list[JudgeRunConfig], BeforeValidator(none_to_list)] = Field(default_factory=empty_list)
    aggregation: Annotated[AggregationConfig, NULL_IS_EMPTY] = Field(default_factory=AggregationConfig)
    anchors: Annotated[AnchorsConfig, NULL_IS_EMPTY] = Field(default_factory=AnchorsConfig)
    security_policy: Annotated[SecurityPolicy, NULL_IS_EMPTY] = Field(default_factory=SecurityPolicy)
    metadata: FreeMap = Field(default_factory=empty_dict)
    judge_system_prompt_path: Annotated[str | None, BeforeValidator(_blank_to_none)] = None
    judge_system_prompt: Annotated[str | None, BeforeValidator(_blank_to_none)] = None

    @field_validator("judges")
    @classmethod
    def _unique_judges(cls, judges: list[JudgeConfig]) -> list[JudgeConfig]:
        reject_duplicate_ids(judges, "judge_id", "judges", prefix="")
        return judges

    @model_validator(mode="after")
    def _references(self) -> "EvaluationProfile":
        if self.judge_system_prompt_path is not None and self.judge_system_prompt is not None:
            raise fail("set either judge_system_prompt_path or judge_system_prompt, not both",
                       "judge_system_prompt")
        known = [j.judge_id for j in self.judges]
        for index, run in enumerate(self.judge_runs):
            if run.judge_id not in known:
                declared = ", ".join(known) or "none declared"
                raise fail(f"unknown judge '{run.judge_id}' (declared judges: {declared})",
                           f"judge_runs[{index}].judge_id")
        reject_duplicate_ids(self.judge_runs, "judge_run_id", "judge_runs")
        return self

    def judge(self, judge_id: str) -> JudgeConfig:
        return next(j for j in self.judges if j.judge_id == judge_id)


__all__ = [
    "AggregationConfig", "AnchorReference", "AnchorsConfig", "EvaluationProfile", "JudgeConfig",
    "JudgeRunConfig", "SecurityPolicy",
]
