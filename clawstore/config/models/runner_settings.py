"""Type rules for the runner settings the llm_probe runner recognises.

Settings live in open maps (run profile `runner_defaults`, `model_overrides.<id>`, case `runner`
extras); unknown keys pass through, but a recognised key with a wrong value is an error at load time
instead of a surprise mid-campaign.
"""

from collections.abc import Callable, Mapping
from typing import Any

from clawstore.config.error_text import number_text_hint
from clawstore.config.limits import MAX_RETRIES, MAX_TIMEOUT_SECONDS, MAX_TOKENS, MAX_TURNS
from clawstore.config.models.base import fail


def _shown(value: Any) -> str:
    """repr() of a value, cut short (a huge integer's repr is itself an error in Python), and why text that reads as a
    number is text (`1e-1`)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "an integer too large to show"
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + number_text_hint(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number_in(low: float, high: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not _is_number(value) or not low <= value <= high:
            return f"expected a number from {low:g} to {high:g}, got {_shown(value)}"
        return None

    return check


def _int_in(low: int, high: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not _is_int(value) or not low <= value <= high:
            return f"expected an integer from {low} to {high:,}, got {_shown(value)}"
        return None

    return check


def _positive_number(value: Any) -> str | None:
    if not _is_number(value) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        return f"expected a number > 0 and at most {MAX_TIMEOUT_SECONDS:,}, got {_shown(value)}"
    return None


def _int_or_null(value: Any) -> str | None:
    if value is not None and not _is_int(value):
        return f"expected an integer or null, got {_shown(value)}"
    return None


def _tool_choice(value: Any) -> str | None:
    if not isinstance(value, str | dict):
        return f"expected a string or a mapping, got {_shown(value)}"
    return None


SETTING_RULES: dict[str, Callable[[Any], str | None]] = {
    "temperature": _number_in(0, 2),
    "top_p": _number_in(0, 1),
    "max_tokens": _int_in(1, MAX_TOKENS),
    "seed": _int_or_null,
    "timeout_seconds": _positive_number,
    "retries": _int_in(0, MAX_RETRIES),
    "max_turns": _int_in(1, MAX_TURNS),
    "tool_choice": _tool_choice,
}

RECOGNISED_SETTINGS: tuple[str, ...] = tuple(SETTING_RULES)

# A judge's `attempts`: how often claw asks again after an answer it cannot read (the judge's own, never sent).
JUDGE_ATTEMPTS_RULE = _int_in(1, MAX_RETRIES)


def check_settings(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    """Raise (pydantic-style) on the first recognised key whose value is wrong."""
    for key, value in settings.items():
        rule = SETTING_RULES.get(key)
        problem = rule(value) if rule else None
        if problem:
            raise fail(problem, str(key))
    return settings
