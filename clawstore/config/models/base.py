"""Shared building blocks of the config models: strictness, ID type, null-tolerant lists, tags.

Every model is frozen and strict: YAML already carries types, so a string where a number belongs is
an error rather than a silent coercion. Unknown keys are rejected except in the few open objects.
"""

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from clawstore.config.error_text import got_text, number_text_hint, unquoted_hint
from clawstore.config.ids import ID_PATTERN
from clawstore.errors import quoted
from clawstore.values.costs import PRICE_KEYS
from clawstore.values.urls import (
    ENV_NAME,
    chat_url_problem,
    credential_in_url,
    is_credential_key,
    is_env_name,
    is_http_url,
)


def fail(message: str, field: str | None = None) -> PydanticCustomError:
    """A validation error with our own wording; `field` extends the location (e.g. 'temperature')."""
    return PydanticCustomError("claw", "{message}", {"message": message, "field": field or ""})


def reject_secrets(extras: dict[str, Any], hint: str, prefix: str = "") -> None:
    for key in extras:
        if is_credential_key(str(key)):
            raise fail(f"'{key}' looks like a credential; configs are stored, secrets must not be: {hint}",
                       f"{prefix}{key}")


# A value that is a URL and nothing else (a URL in prose is the prose's: a prompt may cite one).
_WHOLE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[/\\]{1,2}\S+")


# An environment reference (`${BRAVE_API_KEY}`, which OpenClaw substitutes when it reads its config): no secret.
_ENV_REFERENCE = re.compile(rf"\$\{{{ENV_NAME.pattern}\}}")


def _holds_secret(value: Any) -> bool:
    """A value a secret-named key holds that would be a secret: text (but an environment reference) or a number."""
    if isinstance(value, str):
        return bool(value.strip()) and not _ENV_REFERENCE.fullmatch(value.strip())
    return isinstance(value, int | float) and not isinstance(value, bool)


def reject_credential_urls(value: Any, hint: str, field: str = "") -> None:
    """A URL carrying a credential anywhere in a config's free part (a model's extras, a judge's request options, an
    agent's openclaw block) is refused as a `base_url`'s is: the config is stored with every run. So is a key named
    as a credential (is_credential_key: `primary_params.api_key`, `request_options.extra_headers.Authorization` or
    `x-api-key`, an agent's `tools.web.search.apiKey`) at any depth when it holds text or a number (a mapping under
    it, as a JSON schema's `password` property, is no secret; nor is `${NAME}`, an environment reference)."""
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{field}{key}" if not field or field.endswith(".") else f"{field}.{key}"
            if is_credential_key(str(key)) and _holds_secret(item):
                raise fail(f"'{key}' looks like a credential; configs are stored, secrets must not be: {hint}", inner)
            reject_credential_urls(item, hint, inner)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            reject_credential_urls(item, hint, f"{field}[{index}]")
    elif isinstance(value, str) and _WHOLE_URL.fullmatch(re.sub(r"[\t\r\n]", "", value).strip()):
        credential = credential_in_url(value)
        if credential is not None:
            raise fail(f"a URL that carries a credential ({credential}); configs are stored, secrets must not be: "
                       f"{hint}", field)


# A suite model's or judge's `pricing` (runners/pricing.py): USD per 1M tokens, and `batch`, its batch factor.
PRICING_FIELDS = (*PRICE_KEYS, "batch")
# Above any model's price (the dearest list at ~600 USD per 1M tokens): a price past it (1e300) priced paid runs at
# costs their records refuse to hold, so the runs were paid for, not kept, and the build said 0 spent.
MAX_PRICE_PER_MILLION = 10_000


def check_pricing(extras: dict[str, Any]) -> None:
    """`pricing`, when given, is a mapping of those fields to numbers >= 0: a misspelt field was a price of 0, and
    so a cost shown smaller than it was (`pricing: {}` priced every run at 0). Empty (`pricing:`, YAML null) is not
    given, as `pricing: {}` and any empty field are: no price declared. `cost` (OpenClaw's name, read by
    runners/pricing.py when `pricing` is absent) is held to the same prices; it has no `batch`, and beside a
    `pricing` it would be ignored, so it is refused there unless it says the same prices (a config that said
    them twice validated before session 57, and nothing is ignored)."""
    pricing, cost = extras.get("pricing"), extras.get("cost")
    _check_prices(pricing, "pricing", PRICING_FIELDS)
    if cost is not None and pricing is not None and cost != {k: v for k, v in pricing.items() if k != "batch"}:
        raise fail("give prices once: 'pricing' or its OpenClaw name 'cost', not both", "cost")
    _check_prices(cost, "cost", PRICE_KEYS)


def _check_prices(raw: Any, name: str, fields: tuple[str, ...]) -> None:
    if raw is None:
        return
    if not isinstance(raw, dict):
        got = "a list" if isinstance(raw, list) else quoted(raw)
        raise fail(f"expected a mapping of USD per 1M tokens ({', '.join(fields)}), got {got}", name)
    for key, value in raw.items():
        if key not in fields:
            raise fail(f"unknown field {quoted(key)} (allowed: {', '.join(fields)})", f"{name}.{key}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_PRICE_PER_MILLION:
            raise fail(f"expected a number from 0 to {MAX_PRICE_PER_MILLION:,}, got {quoted(value)}"
                       f"{number_text_hint(value)}", f"{name}.{key}")


def check_text_fields(extras: dict[str, Any], names: tuple[str, ...]) -> None:
    """Extra fields clawstore reads as a model's name are text (or null): a number or a list was passed over without
    a word, so another model (the `model_id`, the `judge_id`) was called and paid for."""
    for name in names:
        value = extras.get(name)
        if value is not None and not isinstance(value, str):
            raise fail(f"expected a string, got {got_text(value)}{unquoted_hint(value)}", name)


def check_endpoint(extras: dict[str, Any]) -> None:
    """`base_url` / `api_key_env` (which OpenAI-compatible server a model or judge calls: providers/endpoint.py) of a
    shape a request can use: else `claw validate` said OK and the build was refused, naming no file."""
    base_url, key_env = extras.get("base_url"), extras.get("api_key_env")
    credential = credential_in_url(base_url) if isinstance(base_url, str) else None
    if credential is not None:  # (the URL is in every run's identity, record and batch document, and pushed)
        raise fail(f"carries a credential ({credential}); configs are stored, secrets must not be: put the key in an "
                   "environment variable and name it with 'api_key_env'", "base_url")
    if base_url is not None and not (isinstance(base_url, str) and is_http_url(base_url)):
        raise fail(f"must be an http(s) URL such as http://127.0.0.1:8000/v1, got {quoted(base_url)}", "base_url")
    if isinstance(base_url, str) and (problem := chat_url_problem(base_url)) is not None:
        raise fail(problem, "base_url")  # (every request went to …/chat/completions/chat/completions: HTTP 404)
    if key_env is not None and not isinstance(key_env, str):
        raise fail(f"must be the name of an environment variable, got {quoted(key_env)}", "api_key_env")
    if isinstance(key_env, str) and key_env.strip() and not is_env_name(key_env):
        # (never echoed: what is not a name is most often the key itself, pasted here)
        raise fail("must be the name of an environment variable (letters, digits and _), not its value: put the key "
                   "in a variable and name it here", "api_key_env")


# defer_build: a model's validator is built when it first validates, not when its class is made, so a workspace with
# no agent or evaluation profile never builds theirs (~8 ms of a command's start; the same validator either way).
class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)


class OpenModel(BaseModel):
    """An object that passes unknown keys through (they stay available in `model_extra`)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)

    @property
    def extras(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


def reject_duplicate_ids(items: list[Any], attr: str, field: str, prefix: str | None = None) -> None:
    """Fail on the second item whose `attr` repeats an earlier one, naming both positions.

    `field` is the list's name in messages; `prefix` its name in the error location (default: same)."""
    seen: dict[str, int] = {}
    where = field if prefix is None else prefix
    for index, item in enumerate(items):
        value = getattr(item, attr)
        if value in seen:
            raise fail(f"duplicate {attr} '{value}' (also {field}[{seen[value]}])", f"{where}[{index}].{attr}")
        seen[value] = index


# A field's empty default, made anew for each model. Python functions: for `list` or `dict` pydantic read the builtin's
# text signature (to learn it takes no argument), tokenizing it, at each model's first validator (~3 ms of a start).
def empty_list() -> list[Any]:
    return []


def empty_dict() -> dict[str, Any]:
    return {}


def none_to_list(value: Any) -> Any:
    return [] if value is None else value


def _none_to_dict(value: Any) -> Any:
    return {} if value is None else value


def _check_schema_version(value: Any) -> Any:
    if type(value) is not int or value != 1:
        raise fail(f"must be 1, got {quoted(value)}")
    return value


def _normalize_tags(value: Any) -> Any:
    if value is None:
        return []
    if not isinstance(value, list):
        return value
    if not all(isinstance(tag, str) for tag in value):
        return value  # let the list[str] validator name the bad element
    return sorted({tag.strip() for tag in value if tag.strip()})


def _trim_tags(value: Any) -> Any:
    """A selection's tag filters trimmed as a case's tags are, so a tag written alike on both sides matches."""
    value = none_to_list(value)
    if isinstance(value, list) and all(isinstance(tag, str) for tag in value):
        return [tag.strip() for tag in value]
    return value  # let the list[str] validator name the bad element


SchemaVersion = Annotated[int, BeforeValidator(_check_schema_version)]
# An optional section written with nothing under it (`case_selection:` with its keys commented out: YAML null) is the
# section left out, as an empty list or free map is; a required one (`input:`, `runner:`) stays an error.
NULL_IS_EMPTY = BeforeValidator(_none_to_dict)
FreeMap = Annotated[dict[str, Any], BeforeValidator(_none_to_dict)]
Tags = Annotated[list[str], BeforeValidator(_normalize_tags)]
StrList = Annotated[list[str], BeforeValidator(none_to_list)]
TagFilter = Annotated[list[str], BeforeValidator(_trim_tags)]
IdList = Annotated[list[Id], BeforeValidator(none_to_list)]

__all__ = [
    "NULL_IS_EMPTY", "Field", "FreeMap", "Id", "IdList", "NonEmptyStr", "OpenModel", "SchemaVersion", "StrList",
    "StrictModel", "TagFilter", "Tags", "empty_dict", "empty_list", "fail", "reject_credential_urls", "reject_secrets",
]
