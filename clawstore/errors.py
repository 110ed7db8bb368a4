"""Error types shared by every layer; each carries the process exit code the CLI uses."""

from __future__ import annotations


class ClawError(Exception):
    """An expected failure with a one-line message for the user."""

    exit_code = 1


class UsageError(ClawError):
    """Bad command-line usage or a bad reference (exit 2)."""

    exit_code = 2


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
