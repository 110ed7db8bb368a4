"""Bound a YAML or JSON text's nesting depth and alias expansion before any recursive code sees it, so that a hostile
file is refused in one line instead of crashing the process or exhausting memory. Details: docs/configuration.md
(Details by module)."""

from __future__ import annotations

import re

import yaml

from clawstore.config.limits import MAX_ALIAS_NODES, MAX_ALIAS_TEXT, MAX_NESTING_DEPTH
from clawstore.values.jsontext import nests_deeper_than


class ShapeProblem(Exception):
    """The text nests too deep or expands too far; the message is ready for the user."""


# Line starts: the indentation, then the block indicators (`- `, `? `, `: `) and node properties
# (`&anchor`, `!tag`) that may open further block collections on the same line.
_INDENT = re.compile(r"^[ \t]*", re.MULTILINE)
_LINE_PREFIX = re.compile(r"^[ \t]*(?:(?:[-?:]|[&!]\S*)(?:[ \t]+|$))+", re.MULTILINE)
_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")  # line breaks the regexes above do not see


def _yaml_depth_bound(text: str) -> int | None:
    """An upper bound on the nesting depth of a YAML text, or None when no cheap bound is known: counted from line
    indentation and flow brackets, loose on purpose (cheap, never too small). Details: docs/configuration.md (Details by
    module)."""
    if any(mark in text for mark in _OTHER_BREAKS):
        return None
    indents = len(set(_INDENT.findall(text)))
    prefix = max(map(len, _LINE_PREFIX.findall(text)), default=0)
    return 2 * indents * (prefix + 1) + text.count("[") + text.count("{")


def _located(message: str, mark: yaml.Mark | None) -> str:
    return f"{message} at line {mark.line + 1}, column {mark.column + 1}" if mark else message


def check_yaml_shape(text: str, loader: type) -> None:
    """Raise ShapeProblem if the document nests deeper than allowed or its aliases expand too far.

    A syntax error surfaces as the parser's own yaml.YAMLError (the caller words those).
    """
    if "*" not in text:  # no alias: only the depth can be a problem
        bound = _yaml_depth_bound(text)
        if bound is not None and bound <= MAX_NESTING_DEPTH:
            return
    try:
        _walk_events(text, loader)
    except yaml.MarkedYAMLError as exc:
        # libyaml 0.2.6 (PyYAML 6.0.4 wheels) has a nesting limit of its own, met first when its
        # scanner reads ahead through flow collections: the same refusal, in our words.
        if "nesting depth" not in str(exc.problem):
            raise
        raise ShapeProblem(_located(f"nesting deeper than {MAX_NESTING_DEPTH} levels", exc.problem_mark)) from None


def _walk_events(text: str, loader: type) -> None:
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, characters of text) the anchored node expands to
    stack: list[list] = [[0, 0, None]]  # per open collection: [nodes inside, characters inside, anchor]
    expanded = expanded_text = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) > MAX_NESTING_DEPTH:
                raise ShapeProblem(_located(f"nesting deeper than {MAX_NESTING_DEPTH} levels", event.start_mark))
            stack.append([1, 0, event.anchor])
        elif isinstance(event, yaml.CollectionEndEvent):
            count, chars, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = (count, chars)
            stack[-1][0] += count
            stack[-1][1] += chars
        elif isinstance(event, yaml.ScalarEvent):
            stack[-1][0] += 1
            stack[-1][1] += len(event.value)
            if event.anchor is not None:
                sizes[event.anchor] = (1, len(event.value))
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for _, _, anchor in stack):  # (`&m {self: *m}`: a value containing itself)
                raise ShapeProblem(_located(f"the alias *{event.anchor} refers to a collection that contains it (a "
                                            "value without end)", event.start_mark))
            size, chars = sizes.get(event.anchor, (1, 0))
            expanded += size
            expanded_text += chars
            if expanded > MAX_ALIAS_NODES:
                raise ShapeProblem(_located(
                    f"aliases expand to more than {MAX_ALIAS_NODES:,} nodes (an alias bomb?)", event.start_mark))
            if expanded_text > MAX_ALIAS_TEXT:  # (few nodes, long text: each copy is held, hashed and sent)
                raise ShapeProblem(_located(
                    f"aliases expand to more than {MAX_ALIAS_TEXT // 2**20} MiB of text (an alias bomb?)",
                    event.start_mark))
            stack[-1][0] += size
            stack[-1][1] += chars


def check_json_depth(text: str) -> None:
    """Raise ShapeProblem if a JSON text nests deeper than allowed (strings skipped, no recursion)."""
    if nests_deeper_than(text, MAX_NESTING_DEPTH):
        raise ShapeProblem(f"nesting deeper than {MAX_NESTING_DEPTH} levels")
