"""Read one YAML file: the C safe loader when available, and one-line messages for every failure."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Hashable
from math import isfinite
from pathlib import Path
from typing import Any, Protocol

import yaml

from clawstore.config.containment import file_kind
from clawstore.config.error_text import yaml_type
from clawstore.config.limits import INT_MAX, INT_MIN, MAX_CONFIG_BYTES, MAX_INT_CHARS
from clawstore.config.yamlshape import ShapeProblem, check_json_depth, check_yaml_shape
from clawstore.errors import quoted
from clawstore.values.jsontext import without_lone_surrogates

try:  # libyaml is several times faster; the pure-Python loader accepts the same documents
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Base = yaml.SafeLoader

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader, except that a key written twice in one mapping is an error, not 'last wins'."""

    found_not_json = False  # (a value without a JSON form was made: `_refuse_not_json` names it)

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict:  # type: ignore[override]
        if isinstance(node, yaml.MappingNode) and len(node.value) > 1:
            keys = [k.value for k, _ in node.value]
            try:
                unique = len(set(keys)) == len(keys)
            except TypeError:  # a non-scalar key: take the careful path below
                unique = False
            if not unique:  # rare: look again, skipping merge keys, to name the duplicate
                seen: set[str] = set()
                for key_node, _ in node.value:
                    if key_node.id == "scalar" and key_node.tag != _MERGE_TAG:
                        if key_node.value in seen:
                            raise yaml.constructor.ConstructorError(
                                None, None, f"duplicate key {quoted(key_node.value)}", key_node.start_mark)
                        seen.add(key_node.value)
        self.flatten_mapping(node)  # (merge keys: their pairs first, so that a key written here wins)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str) and isinstance(key_node, yaml.ScalarNode):
                # `2024:`, `true:`, `1.5:` are the key as written: configs hold JSON, whose keys are text (a number
                # key beside a text key stopped a build's hashing with a TypeError; `1:` and `true:` were one key)
                key = key_node.value
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(None, None, "a list or mapping cannot be a key",
                                                        key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        # int() of a 5,000-digit literal raises ValueError (and costs quadratic time before that)
        if len(node.value) > MAX_INT_CHARS:
            raise yaml.constructor.ConstructorError(
                None, None, f"integer literal longer than {MAX_INT_CHARS} characters", node.start_mark)
        value = super().construct_yaml_int(node)
        if not INT_MIN <= value <= INT_MAX:
            raise yaml.constructor.ConstructorError(
                None, None, "integer out of range (config integers must fit in 64 bits)", node.start_mark)
        return value


    def construct_yaml_float(self, node: yaml.ScalarNode) -> Any:
        value = super().construct_yaml_float(node)
        if isfinite(value):
            return value
        return self._not_json(node, f"{node.value} is not a finite number (JSON has no NaN or infinity; quote it "
                                    "for text)")

    def construct_as_written(self, node: yaml.ScalarNode) -> str:
        # An unquoted date (`created: 2026-01-01`) is the text as written, as JSON would hold it, not a datetime
        return str(self.construct_scalar(node))

    def construct_other(self, node: yaml.Node) -> Any:
        tag = node.tag.rsplit(":", 1)[-1]
        return self._not_json(node, f"a !!{tag} value has no JSON form (configs hold text, numbers, booleans, lists "
                                    "and mappings)")

    def _not_json(self, node: yaml.Node, problem: str) -> _NotJson:
        """Configs are hashed as JSON (such a value made a build fail with a traceback): kept as a marker, said with its
        field once the document is built (`_refuse_not_json`)."""
        self.found_not_json = True
        return _NotJson(node.start_mark, problem)


class _NotJson:
    def __init__(self, mark: yaml.Mark, problem: str):
        self.mark, self.problem = mark, problem


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_as_written)
for _tag in ("binary", "set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader.construct_other)


class YamlProblem(Exception):
    """A file could not be read or parsed; the message is ready for the user."""


def parse_yaml_text(text: str) -> Any:
    try:
        check_yaml_shape(text, _Base)  # before the composer recurses
        loader = _Loader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
        if loader.found_not_json:
            _refuse_not_json(data, "")
        return data
    except ShapeProblem as exc:
        raise YamlProblem(f"invalid YAML: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise YamlProblem(f"invalid YAML{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(f"invalid YAML: {exc}") from None


def _refuse_not_json(value: Any, field: str) -> None:
    """YamlProblem naming the first value without a JSON form, by its field and its place in the text."""
    if isinstance(value, _NotJson):
        at = f"{field}: " if field else ""
        raise YamlProblem(f"invalid YAML at line {value.mark.line + 1}, column {value.mark.column + 1}: "
                          f"{at}{value.problem}")
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_not_json(key, field)
            _refuse_not_json(item, f"{field}.{key}" if field else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_not_json(item, f"{field}[{index}]")


def _not_a_number(name: str) -> Any:
    raise YamlProblem(f"invalid JSON: {name} is not a number JSON allows")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when a key is written twice (as in YAML; json.loads keeps the last one silently)."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise YamlProblem(f"invalid JSON: duplicate key {quoted(key)}")
            seen.add(key)
    return found


def parse_json_text(text: str) -> Any:
    text = text.removeprefix("\ufeff")  # a UTF-8 BOM, as editors on Windows write it (YAML's reader skips it too)
    try:
        check_json_depth(text)
        data = json.loads(text, parse_constant=_not_a_number, object_pairs_hook=_unique_keys)
    except ShapeProblem as exc:
        raise YamlProblem(f"invalid JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise YamlProblem(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if "\\u" in text and without_lone_surrogates(data) != data:  # (only an escape can give one)
        # As YAML's "invalid Unicode character escape": hashing the case failed with a traceback.
        raise YamlProblem("invalid JSON: a lone surrogate escape (\\ud800-\\udfff without its pair) "
                          "is not a character")
    return data


def read_text(path: Path) -> str:
    """A config or message file's text; larger than MAX_CONFIG_BYTES is refused before reading."""
    return decoded(read_bytes(path))


def decoded(data: bytes) -> str:
    """A config file's bytes as text (not UTF-8: YamlProblem)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlProblem(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_bytes(path: Path) -> bytes:
    """A config or message file's bytes; larger than MAX_CONFIG_BYTES is refused before reading."""
    try:
        # (not blocking: a named pipe would wait at open for a writer for ever; refused below, as a directory is)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            os.close(fd)
            raise YamlProblem(f"not a regular file ({file_kind(found.st_mode)})")
        with open(fd, "rb") as handle:
            size = found.st_size
            # As many bytes as the file has and one (a read of the limit mapped and unmapped 4 MiB a file); more
            # only if it has them (grown since, or a pipe), still to the limit and one.
            data = handle.read(min(size, MAX_CONFIG_BYTES) + 1)
            if len(data) > size:
                data += handle.read(MAX_CONFIG_BYTES + 1 - len(data))
        if max(size, len(data)) > MAX_CONFIG_BYTES:
            raise YamlProblem(f"file is larger than {MAX_CONFIG_BYTES:,} bytes (the limit for config files)")
        return data
    except OSError as exc:
        raise YamlProblem(f"cannot read file: {exc.strerror or exc}") from None


class Parser(Protocol):
    """What parses a config file's bytes in place of `parse_yaml_text` (config/parsed.py ParsedCases)."""

    def parse(self, path: Path, data: bytes) -> Any: ...


def load_mapping(path: Path, parsed: Parser | None = None) -> dict[str, Any]:
    """The file's top-level mapping; an empty file is `{}` (so required fields are reported). `parsed`: case files
    parsed before, by their bytes (config/parsed.py)."""
    data = parse_yaml_text(read_text(path)) if parsed is None else parsed.parse(path, read_bytes(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise YamlProblem(f"top level must be a mapping, got {yaml_type(data)}")
    return data
