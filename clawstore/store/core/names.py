"""The one rule for names that become a path or a ref (build ids, ref and pin names, tree entries), so that no name can
climb out of its directory or hide a path separator. The rule: docs/store.md (Details by module)."""

from __future__ import annotations

import re

from clawstore.errors import UsageError, quoted

NAME_MAX = 200
REF_SEGMENTS_MAX = 8
SEGMENT_BYTES_MAX = 255
PATH_BYTES_MAX = 4096
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+@=,:-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NAME_HINT = (f"1..{NAME_MAX} of letters, digits and '._+@=,:-', starting with a letter, digit or '_', "
             "without '..'")


class BadNameError(UsageError):
    """A name that would become a path or a ref breaks the naming rule (exit 2: bad input)."""


def name_problem(value: object) -> str | None:
    """Why `value` is not a valid name (None if it is one)."""
    if not isinstance(value, str):
        return f"is not a string ({type(value).__name__})"
    if not 1 <= len(value) <= NAME_MAX:
        return f"has {len(value)} characters (1..{NAME_MAX} allowed)"
    if not _NAME.fullmatch(value) or ".." in value:
        return f"is not {NAME_HINT}"
    return None


def is_name(value: object) -> bool:
    return name_problem(value) is None


def check_name(value: object, what: str) -> str:
    """`value` if it is a valid name, else BadNameError naming `what` (and a short, safe repr)."""
    problem = name_problem(value)
    if problem is not None:
        raise BadNameError(f"{what} {quoted(value)} {problem}")
    return value  # type: ignore[return-value]


def ref_name_problem(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return "is not a non-empty string"
    parts = value.split("/")
    if len(parts) > REF_SEGMENTS_MAX:
        return f"has {len(parts)} segments (1..{REF_SEGMENTS_MAX} allowed)"
    for part in parts:
        problem = name_problem(part)
        if problem is not None:
            return f"has a segment {quoted(part)} that {problem}"
    return None


def check_ref_name(value: object, what: str = "ref name") -> str:
    problem = ref_name_problem(value)
    if problem is not None:
        # (the rule once: a segment's problem states it already)
        rule = "" if NAME_HINT in problem else f": use '/'-separated names, each {NAME_HINT}"
        raise BadNameError(f"{what} {quoted(value)} {problem}{rule}")
    return value  # type: ignore[return-value]


def relative_path_problem(value: object) -> str | None:
    """Why `value` is not a safe relative path (None if it is one)."""
    if not isinstance(value, str) or not value:
        return "is not a non-empty string"
    if _CONTROL.search(value):
        return "contains a NUL or control character"
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) > PATH_BYTES_MAX:
        return f"is {len(raw)} bytes long (at most {PATH_BYTES_MAX})"
    if value.startswith("/"):
        return "is absolute"
    for part in value.split("/"):
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' segment"
        if len(part.encode("utf-8", "surrogatepass")) > SEGMENT_BYTES_MAX:
            return f"has a segment longer than {SEGMENT_BYTES_MAX} bytes"
    return None

