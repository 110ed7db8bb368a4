"""Type rules for the runner settings the llm_probe runner recognises.

Settings live in open maps (run profile `runner_defaults`, `model_overrides.<id>`, case `runner`
extras); unknown keys pass through, but a recognised key with a wrong value is an error at load time
instead of a surprise mid-campaign.
"""

from collections.abc import Callable, Mapping
from typing import Any

from clawstore.config.models.base import fail


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number_in(low: float, high: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not _is_number(value) or not low <= value <= high:
            return f"expected a number from {low:g} to {high:g}, got {value!r}"
        return None

    return check


def _int_at_least(low: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not _is_int(value) or value < low:
            return f"expected an integer >= {low}, got {value!r}"
        return None

    return check


def _positive_number(value: Any) -> str | None:
    if not _is_number(value) or value <= 0:
        return f"expected a number > 0, got {value!r}"
    return None


def _int_or_null(value: Any) -> str | None:
    if value is not None and not _is_int(value):
        return f"expected an integer or null, got {value!r}"
    return None


def _tool_choice(value: Any) -> str | None:
    if not isinstance(value, str | dict):
        return f"expected a string or a mapping, got {value!r}"
    return None


SETTING_RULES: dict[str, Callable[[Any], str | None]] = {
    "temperature": _number_in(0, 2),
    "top_p": _number_in(0, 1),
    "max_tokens": _int_at_least(1),
    "seed": _int_or_null,
    "timeout_seconds": _positive_number,
    "retries": _int_at_least(0),
    "max_turns": _int_at_least(1),
    "tool_choice": _tool_choice,
}

RECOGNISED_SETTINGS: tuple[str, ...] = tuple(SETTING_RULES)


def check_settings(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    """Raise (pydantic-style) on the first recognised key whose value is wrong."""
    for key, value in settings.items():
        rule = SETTING_RULES.get(key)
        problem = rule(value) if rule else None
        if problem:
            raise fail(problem, str(key))
    return settings
