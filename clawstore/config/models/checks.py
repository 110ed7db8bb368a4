"""Deterministic checks: one built-in (declarative) check or a Python hook per entry."""

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from clawstore.config.ids import DIMENSIONS
from clawstore.config.limits import MAX_CHECK_COUNT
from clawstore.config.models.base import Id, NonEmptyStr, StrictModel, empty_list, fail
from clawstore.errors import quoted

DeclarativeKind = Literal[
    "final_response_present",
    "tool_call_count",
    "file_exists",
    "file_contains",
    "path_exists",
    "status_is",
    "output_artifact_present",
    "openclaw_workspace_file_present",
]

# Fields each kind may carry (besides `kind`) and the ones it must carry.
KIND_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "final_response_present": ((), ()),
    "tool_call_count": (("count",), ("count",)),
    "file_exists": (("path",), ("path",)),
    "file_contains": (("path", "text"), ("path", "text")),
    "path_exists": (("path",), ("path",)),
    "status_is": (("status",), ("status",)),
    "output_artifact_present": (("artifact_id", "artifact_type", "uri"), ()),
    "openclaw_workspace_file_present": (
        ("relative_path", "contains", "contains_all", "contains_any"),
        ("relative_path",),
    ),
}

# Field names other documents use for the same thing; we point the user at the accepted name.
RENAMED_FIELDS: dict[tuple[str, str], str] = {
    ("tool_call_count", "expected"): "count",
    ("status_is", "expected"): "status",
}

Dimension = Literal["task", "process", "autonomy", "closeness", "efficiency", "spark"]


def _normalize_dimensions(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(v, str) and v in DIMENSIONS for v in value):
        return sorted(set(value))
    return value


class DeclarativeCheck(StrictModel):
    kind: DeclarativeKind
    count: Annotated[int, Field(ge=0, le=MAX_CHECK_COUNT)] | None = None
    path: NonEmptyStr | None = None
    text: str | None = None
    status: Literal["success", "invalid", "incomplete", "provider_error", "timed_out", "failed"] | None = None
    artifact_id: Id | None = None
    artifact_type: Id | None = None
    uri: NonEmptyStr | None = None
    relative_path: NonEmptyStr | None = None
    contains: str | None = None
    contains_all: list[str] | None = None
    contains_any: list[str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _fields_for_kind(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kind = data.get("kind")
        if not isinstance(kind, str) or kind not in KIND_FIELDS:
            return data  # the `kind` literal reports it
        allowed, required = KIND_FIELDS[kind]
        for key in data:
            if key == "kind" or key in allowed:
                continue
            if (kind, key) in RENAMED_FIELDS:
                use = RENAMED_FIELDS[(kind, key)]
                raise fail(f"unknown field '{key}' for kind '{kind}': use '{use}'", str(key))
            if key in cls.model_fields:
                names = ", ".join(allowed) or "none"
                raise fail(f"field '{key}' does not apply to kind '{kind}' (allowed: {names})", str(key))
        for key in required:
            if data.get(key) is None:
                raise fail(f"kind '{kind}' requires '{key}'", key)
        if kind == "openclaw_workspace_file_present" and data.get("contains") is not None and (
            data.get("contains_all") is not None or data.get("contains_any") is not None
        ):
            raise fail(
                "use either 'contains' or 'contains_all'/'contains_any', not both",
                "contains",
            )
        return data


def _is_identifier(name: str) -> bool:
    """A Python identifier as Python reads them (`prüfe` is one), whole: a regex's `$` let "check\\n" through."""
    return name.isidentifier()


def _is_dotted(name: str) -> bool:
    return all(_is_identifier(part) for part in name.split("."))


class PythonHook(StrictModel):
    path: NonEmptyStr | None = None
    import_path: NonEmptyStr | None = None
    callable_name: str

    @model_validator(mode="after")
    def _one_target(self) -> "PythonHook":
        if (self.path is None) == (self.import_path is None):
            raise fail("set either 'path' or 'import_path' (exactly one)")
        if self.import_path is not None and not _is_dotted(self.import_path):
            raise fail(f"expected a dotted module path like 'pkg.checks', got {quoted(self.import_path)}",
                       "import_path")
        if not _is_identifier(self.callable_name):
            raise fail(f"expected a Python identifier, got {quoted(self.callable_name)}", "callable_name")
        return self


class DeterministicCheck(StrictModel):
    check_id: Id
    description: str | None = None
    dimensions: Annotated[list[Dimension], BeforeValidator(_normalize_dimensions)] = Field(default_factory=empty_list)
    declarative: DeclarativeCheck | None = None
    python_hook: PythonHook | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_hook_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "hook" in data:
            raise fail("unknown field 'hook': use 'python_hook'", "hook")
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> "DeterministicCheck":
        if (self.declarative is None) == (self.python_hook is None):
            raise fail("set either 'declarative' or 'python_hook' (exactly one)")
        return self

    @property
    def kind(self) -> str:
        """The declarative kind, or 'python_hook'."""
        return self.declarative.kind if self.declarative else "python_hook"


__all__ = ["DeclarativeCheck", "DeterministicCheck", "Dimension", "KIND_FIELDS", "PythonHook"]
