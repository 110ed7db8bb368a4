"""Read one YAML file: the C safe loader when available, and one-line messages for every failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from clawstore.config.error_text import yaml_type

try:  # libyaml is several times faster; the pure-Python loader accepts the same documents
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader


class YamlProblem(Exception):
    """A file could not be read or parsed; the message is ready for the user."""


def parse_yaml_text(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise YamlProblem(f"invalid YAML{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(f"invalid YAML: {exc}") from None


def read_text(path: Path) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise YamlProblem(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise YamlProblem(f"cannot read file: {exc.strerror or exc}") from None


def load_mapping(path: Path) -> dict[str, Any]:
    """The file's top-level mapping; an empty file is `{}` (so required fields are reported)."""
    data = parse_yaml_text(read_text(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise YamlProblem(f"top level must be a mapping, got {yaml_type(data)}")
    return data
