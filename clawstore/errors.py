"""Error types shared by every layer; each carries the process exit code the CLI uses."""

from __future__ import annotations

import re

from clawstore.values.key_shapes import KEY_SHAPES

_CONTROL = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F, 0x85]} | {0x2028: "\\u2028", 0x2029: "\\u2029"}


def one_line(text: str, limit: int = 2000) -> str:
    """`text` as one line of at most about `limit` characters: control characters escaped (a name taken
    from a hostile file must not forge lines of output), the rest of a longer text cut and counted."""
    text = text.translate(_CONTROL)
    return text if len(text) <= limit else f"{text[:limit]}... (cut: {len(text)} characters in all)"


# A refusal that quotes a value masks a key's shape in it (values/key_shapes.py): a value in the wrong place is often a
# key pasted there (`base_url: sk-or-v1-…`, `$OPENROUTER_BASE_URL`).
_KEY_SHAPE = re.compile("|".join(KEY_SHAPES))


def quoted(value: object, limit: int = 60) -> str:
    """A value as an error message quotes it: its repr (a str's control characters escaped), cut after
    `limit` characters, whatever the input (a 5,000-character name, NULs); a key's shape in it masked."""
    return one_line(_KEY_SHAPE.sub("[a key, not shown]", repr(value)), limit)


class ClawError(Exception):
    """An expected failure with a one-line message for the user."""

    exit_code = 1


class UsageError(ClawError):
    """Bad command-line usage or a bad reference (exit 2)."""

    exit_code = 2


def utf8_argument(text: str, where: str, then: str = "") -> str:
    """`text` from the command line, where a non-UTF-8 byte (a Latin-1 terminal's or path's `café`) arrives
    as a lone surrogate that DuckDB, YAML and JSON files cannot take: UsageError naming `where` (and
    `then`, what to do) instead of a traceback further on."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{where}: not UTF-8 text (an undecodable byte at character {exc.start + 1}){then}") from None
    return text


class ConfigError(ClawError):
    """A config file is invalid (exit 2). `path` is the file, `field` the dotted field path."""

    exit_code = 2

    def __init__(self, message: str, path: str | None = None, field: str | None = None):
        self.path = path
        self.field = field
        self.detail = message
        parts = [p for p in (path, field) if p]
        super().__init__(": ".join([*parts, message]))


class StoreError(ClawError):
    """The store is unreadable, corrupt or locked (exit 3)."""

    exit_code = 3


class CorruptObjectError(StoreError):
    """An object's bytes do not hash to its id."""


class MissingObjectError(StoreError):
    """An object id is not present in the store."""
