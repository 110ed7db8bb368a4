"""Config problems as data: one `ConfigIssue` per problem, with the file, the field and a human message."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from clawstore.errors import ConfigError


@dataclass(frozen=True)
class ConfigIssue:
    path: str  # file, relative to the workspace root (posix separators)
    field: str  # dotted field path like `input.messages[0].content`; "" for file-level problems
    message: str
    file: Path | None = field(default=None, compare=False, repr=False)  # absolute path, for filtering

    def __str__(self) -> str:
        return ": ".join(part for part in (self.path, self.field, self.message) if part)

    def to_error(self) -> ConfigError:
        return ConfigError(self.message, self.path, self.field or None)

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "field": self.field, "message": self.message}


def join_field(base: str, extra: str) -> str:
    """Append a relative field path (`name`, `a.b` or `[3].c`) to `base`."""
    if not extra:
        return base
    if not base or extra.startswith("["):
        return base + extra
    return f"{base}.{extra}"


def format_loc(loc: tuple[str | int, ...]) -> str:
    """Turn a pydantic location tuple into `a.b[0].c`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue  # the key itself is already the previous element
        else:
            out = join_field(out, str(part))
    return out
