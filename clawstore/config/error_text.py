"""Rewrite pydantic validation errors as short, human lines about YAML values."""

from __future__ import annotations

import re
import types
import typing
from typing import TYPE_CHECKING, Any

from clawstore.config.ids import ID_HINT, ID_PATTERN
from clawstore.config.issues import format_loc, join_field
from clawstore.errors import quoted

if TYPE_CHECKING:  # (pydantic imported where an error is described: `yaml_type` and `got_text` are used without it)
    from pydantic import BaseModel, ValidationError

YAML_TYPE_NAMES = {
    dict: "a mapping", list: "a list", str: "a string", int: "an integer", float: "a number",
    bool: "a boolean", type(None): "null",
}


def yaml_type(value: Any) -> str:
    return YAML_TYPE_NAMES.get(type(value), type(value).__name__)


def got_text(value: Any) -> str:
    if isinstance(value, dict | list):
        return yaml_type(value)
    return f"{yaml_type(value)} {quoted(value)}" if value is not None else "null"


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types an annotation may hold (through Annotated, Optional, unions, containers)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg)]
    return [annotation]


def _model_at(root: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class that owns the last element of `loc` (for listing allowed keys)."""
    from pydantic import BaseModel

    current: Any = root
    for part in loc[:-1]:
        found = None
        for candidate in _unwrap(current):
            origin = typing.get_origin(candidate)
            if isinstance(part, int) and origin is list:
                found = typing.get_args(candidate)[0]
            elif isinstance(part, str) and origin is dict:
                found = typing.get_args(candidate)[1]
            elif isinstance(part, str) and isinstance(candidate, type) and issubclass(candidate, BaseModel):
                info = candidate.model_fields.get(part)
                found = info.annotation if info else None
            if found is not None:
                break
        if found is None:
            return None
        current = found
    for candidate in _unwrap(current):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def unquoted_hint(value: Any) -> str:
    """Why YAML gave a number or a boolean where text was meant (`content: yes`, `case_id: 1234`)."""
    if isinstance(value, bool):
        return " (YAML reads an unquoted yes, no, on, off, true or false as a boolean: quote it for text)"
    if isinstance(value, int | float):
        return " (YAML reads an unquoted number as a number: quote it for text)"
    return ""


# A number in exponent form YAML 1.1 (the reference system's loader, and claw's) resolves as text: its floats need a
# dot and a signed exponent (1.0e-1, 1.0e+3), so `1e-1`, `1e3` and `1.0e0` are strings.
_EXPONENT = re.compile(r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+")
_YAML11_FLOAT = re.compile(r"[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9_]+)[eE][-+][0-9]+")


def number_text_hint(value: Any) -> str:
    """Why a value that reads as a number is text where a number belongs (`temperature: 1e-1`)."""
    if isinstance(value, str) and _EXPONENT.fullmatch(value) and not _YAML11_FLOAT.fullmatch(value):
        return (f" (YAML 1.1 reads {value} as text: write the number without an exponent, or with a dot and a signed "
                "exponent, as in 1.0e-1)")
    return ""


def describe(error: dict[str, Any], root: type[BaseModel]) -> tuple[str, str]:
    """(field path, message) for one pydantic error dict."""
    kind = error["type"]
    loc = tuple(error["loc"])
    ctx = error.get("ctx") or {}
    value = error.get("input")
    field = format_loc(loc)
    if kind == "claw":
        return join_field(field, ctx.get("field", "")), ctx["message"]
    if kind == "extra_forbidden":
        model = _model_at(root, loc)
        allowed = ", ".join(model.model_fields) if model else ""
        return field, f"unknown field {quoted(str(loc[-1]))}" + (f" (allowed: {allowed})" if allowed else "")
    if kind == "missing":
        return field, "required field is missing"
    if kind == "literal_error":
        expected = ctx.get("expected", "").replace("'", "").replace(" or ", ", ")
        words = "'" in str(ctx.get("expected", ""))  # (text choices; `version: 2` is not a quoting slip)
        got = "null" if value is None else quoted(value)
        return field, f"expected one of {expected}, got {got}" + (unquoted_hint(value) if words else "")
    if kind == "string_pattern_mismatch" and ctx.get("pattern") == ID_PATTERN:
        return field, f"must match {ID_PATTERN} ({ID_HINT}), got {quoted(value)}"
    if kind == "string_too_short":
        return field, "must not be empty"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return field, f"expected a mapping, got {got_text(value)}"
    if kind == "list_type":
        return field, f"expected a list, got {got_text(value)}"
    if kind == "string_type":
        return field, f"expected a string, got {got_text(value)}{unquoted_hint(value)}"
    if kind in ("int_type", "int_from_float", "int_parsing"):
        return field, f"expected an integer, got {got_text(value)}{number_text_hint(value)}"
    if kind in ("float_type", "float_parsing"):
        return field, f"expected a number, got {got_text(value)}{number_text_hint(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return field, f"expected true or false, got {got_text(value)}"
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        return field, f"must be {bounds[kind]} {limit}, got {quoted(value)}"
    message = error.get("msg", kind)
    return field, message.removeprefix("Value error, ")


def describe_all(exc: ValidationError, root: type[BaseModel]) -> list[tuple[str, str]]:
    return [describe(error, root) for error in exc.errors(include_url=False)]
