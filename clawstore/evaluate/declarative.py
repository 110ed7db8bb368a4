"""The eight declarative check kinds (docs/evaluation.md, "Deterministic checks", documents each).

Each kind is a function `(params, ctx) -> Verdict`. A bad spec raises `CheckSpecError`, which the
caller records as an `error` outcome naming the field.
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from clawstore.evaluate.evidence import (
    SandboxFiles,
    WorkspaceFiles,
    assistant_messages,
    expected_artifact_hints,
    final_output_text,
    normalize_relative_path,
    openclaw_observable_summary,
    read_text_head,
    runner_type,
    stream_contains,
    trace_events,
)
from clawstore.evaluate.specs import case_path_name, host_readable, resolve_case_path

KEY_OUTPUT_READ_LIMIT = 256 * 1024
WORKSPACE_READ_LIMIT = 512 * 1024
RUN_STATUSES = ("success", "failed", "timed_out", "invalid", "incomplete", "provider_error")


class CheckSpecError(ValueError):
    """A check's declaration cannot be evaluated (missing or ill-typed field)."""


@dataclass(frozen=True)
class CheckContext:
    artifact: Mapping[str, Any]
    sandbox: SandboxFiles | None = None
    workspace: WorkspaceFiles | None = None
    case_dir: str | None = None


@dataclass
class Verdict:
    passed: bool
    message: str
    outputs: dict[str, Any] = field(default_factory=dict)


def _require_str(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value.strip():
        raise CheckSpecError(f"field '{name}' must be a non-empty string")
    return value


# ---------------------------------------------------------------------------------------------
# final_response_present

# First line of an error text a CLI prints instead of an answer.
_ERROR_TEXT = re.compile(r"^\s*(error\b|fatal\b|traceback \(most recent call last\)|\w+(error|exception):)", re.I)


def final_response_present(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    art = ctx.artifact
    rtype = runner_type(art)
    finals = trace_events(art, "final_output")
    text, raw_payload = final_output_text(art)
    source = "final_output"
    outputs: dict[str, Any] = {"final_output_count": len(finals), "runner_type": rtype}
    if rtype == "openclaw":
        status = art.get("status")
        if status != "success":
            outputs["content_length"] = len(text)
            return Verdict(False, f"openclaw run ended with status '{status}', not a final answer", outputs)
        if raw_payload:
            outputs["content_length"] = 0
            return Verdict(False, "final output is a raw OpenClaw payload without assistant-visible text", outputs)
        if text.strip() and _ERROR_TEXT.match(text):
            outputs["content_length"] = len(text)
            return Verdict(False, "final output is an error text, not an answer", outputs)
        if not text.strip():
            messages = assistant_messages(art)
            if messages:
                text, source = messages[-1], "assistant_message"
        if not text.strip() and ctx.workspace is not None:
            for hint in expected_artifact_hints(art):
                stream = ctx.workspace.open(normalize_relative_path(hint))
                if stream is None:
                    continue
                decoded, size = read_text_head(stream, KEY_OUTPUT_READ_LIMIT)
                decoded = decoded if size <= KEY_OUTPUT_READ_LIMIT else None
                if decoded is not None and decoded.strip():
                    text, source = decoded, f"workspace:{normalize_relative_path(hint)}"
                    break
    outputs["content_length"] = len(text)
    outputs["source"] = source
    if text.strip():
        return Verdict(True, f"final response present ({len(text)} chars, from {source})", outputs)
    return Verdict(False, "no non-empty final response", outputs)


# ---------------------------------------------------------------------------------------------
# tool_call_count


def tool_call_count(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    expected = params.get("count", params.get("expected"))
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise CheckSpecError("field 'count' must be an integer >= 0")
    actual = len(trace_events(ctx.artifact, "tool_call"))
    counted_from = "trace"
    if actual == 0 and runner_type(ctx.artifact) == "openclaw":
        # OpenClaw traces carry no tool events; its own tool summary counts the calls.
        calls = (openclaw_observable_summary(ctx.artifact).get("tool_summary") or {}).get("calls")
        if isinstance(calls, int) and not isinstance(calls, bool):
            actual, counted_from = calls, "openclaw_tool_summary"
    outputs = {"expected_count": expected, "actual_count": actual, "counted_from": counted_from}
    if actual == expected:
        return Verdict(True, f"{actual} tool call(s), as expected", outputs)
    return Verdict(False, f"{actual} tool call(s), expected {expected}", outputs)


# ---------------------------------------------------------------------------------------------
# file_exists / file_contains / path_exists


def _target(params: Mapping[str, Any], ctx: CheckContext) -> tuple[str, bool, str]:
    """(resolved path, whether the run's sandbox may hold it: only absolute paths can, the path's name in
    the result: as the case wrote it, not where the workspace sits)."""
    raw = _require_str(params, "path")
    name = case_path_name(raw)
    return resolve_case_path(raw, ctx.case_dir), os.path.isabs(name), name


def _sandbox_for(path: str, sandboxed: bool, ctx: CheckContext) -> SandboxFiles | None:
    if sandboxed and ctx.sandbox is not None and ctx.sandbox.exists(path):
        return ctx.sandbox
    return None


def _where(sandbox: SandboxFiles | None) -> str:
    return "run sandbox" if sandbox is not None else "host"


def _searched(sandboxed: bool, ctx: CheckContext) -> str:
    return "run sandbox and host" if sandboxed and ctx.sandbox is not None else "host"


def file_exists(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    path, sandboxed, name = _target(params, ctx)
    box = _sandbox_for(path, sandboxed, ctx)
    found = box.is_file(path) if box is not None else host_readable(path, ctx.case_dir) and os.path.isfile(path)
    outputs = {"path": name, "location": _where(box) if found else None}
    if found:
        return Verdict(True, f"file {name} exists ({_where(box)})", outputs)
    return Verdict(False, f"file {name} does not exist (looked in {_searched(sandboxed, ctx)})", outputs)


def path_exists(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    path, sandboxed, name = _target(params, ctx)
    box = _sandbox_for(path, sandboxed, ctx)
    found = box is not None or (host_readable(path, ctx.case_dir) and os.path.exists(path))
    outputs = {"path": name, "location": _where(box) if found else None}
    if found:
        return Verdict(True, f"path {name} exists ({_where(box)})", outputs)
    return Verdict(False, f"path {name} does not exist (looked in {_searched(sandboxed, ctx)})", outputs)


def file_contains(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    path, sandboxed, name = _target(params, ctx)
    text = params.get("text")
    if not isinstance(text, str) or text == "":
        raise CheckSpecError("field 'text' must be a non-empty string")
    box = _sandbox_for(path, sandboxed, ctx)
    outputs: dict[str, Any] = {"path": name, "expected_text": text, "location": None}
    stream: BinaryIO | None
    if box is not None:
        stream = box.open(path) if box.is_file(path) else None
    elif not host_readable(path, ctx.case_dir) or not os.path.isfile(path):  # (a named pipe: never waited on)
        stream = None
    else:
        try:
            stream = open(path, "rb")  # noqa: SIM115 - closed by stream_contains
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            stream = None
    if stream is None:
        return Verdict(False, f"file {name} does not exist (looked in {_searched(sandboxed, ctx)})", outputs)
    outputs["location"] = _where(box)
    if stream_contains(stream, text):  # a chunk at a time: a run may leave a file of a gigabyte
        return Verdict(True, f"file {name} ({_where(box)}) contains {text!r}", outputs)
    return Verdict(False, f"file {name} ({_where(box)}) does not contain {text!r}", outputs)


# ---------------------------------------------------------------------------------------------
# status_is / output_artifact_present


def status_is(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    expected = params.get("status", params.get("expected"))
    if expected not in RUN_STATUSES:
        raise CheckSpecError(f"field 'status' must be one of {', '.join(RUN_STATUSES)}")
    actual = ctx.artifact.get("status")
    outputs = {"expected_status": expected, "actual_status": actual}
    if actual == expected:
        return Verdict(True, f"run status is '{actual}'", outputs)
    return Verdict(False, f"run status is '{actual}', expected '{expected}'", outputs)


_ARTIFACT_MATCHERS = ("artifact_id", "artifact_type", "uri")


def output_artifact_present(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    # No matcher (the reference's `artifact_type?` left out): any output artifact matches.
    matchers = {k: params[k] for k in _ARTIFACT_MATCHERS if params.get(k) is not None}
    refs = [r for r in ctx.artifact.get("output_artifacts") or [] if isinstance(r, dict)]
    matched = [r for r in refs if all(r.get(k) == v for k, v in matchers.items())]
    wanted = ", ".join(f"{k}={v}" for k, v in matchers.items()) or "any"
    outputs = {**matchers, "matched_count": len(matched)}
    if matched:
        return Verdict(True, f"{len(matched)} output artifact(s) match {wanted}", outputs)
    return Verdict(False, f"no output artifact matches {wanted} ({len(refs)} recorded)", outputs)


# ---------------------------------------------------------------------------------------------
# openclaw_workspace_file_present


def fold(text: str) -> str:
    """Case- and accent-insensitive form: casefold, NFKD, combining marks dropped."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _string_list(params: Mapping[str, Any], name: str) -> list[str]:
    value = params.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CheckSpecError(f"field '{name}' must be a list of non-empty strings")
    return value


def _match_workspace(rel: str, workspace: WorkspaceFiles) -> tuple[list[str], str]:
    paths = list(workspace.paths())
    if rel in paths:
        return [rel], "exact"
    base = posixpath.basename(rel)
    same_name = sorted(p for p in paths if posixpath.basename(p) == base)
    return same_name, "basename"


def openclaw_workspace_file_present(params: Mapping[str, Any], ctx: CheckContext) -> Verdict:
    raw = _require_str(params, "relative_path")
    rel = normalize_relative_path(raw)
    contains = params.get("contains")
    if contains is not None and (not isinstance(contains, str) or not contains):
        raise CheckSpecError("field 'contains' must be a non-empty string")
    contains_all = _string_list(params, "contains_all")
    contains_any = _string_list(params, "contains_any")
    if contains is not None and (contains_all or contains_any):
        raise CheckSpecError("use either 'contains' or 'contains_all'/'contains_any', not both")
    outputs: dict[str, Any] = {"relative_path": rel, "matched_count": 0, "matched_path": None}
    for name, value in (("contains", contains), ("contains_all", contains_all), ("contains_any", contains_any)):
        if value:
            outputs[name] = value
    rtype = runner_type(ctx.artifact)
    if rtype != "openclaw":
        return Verdict(False, f"not an openclaw run (runner '{rtype}'): no workspace to inspect", outputs)
    if ctx.workspace is None:
        raise CheckSpecError("the run's final workspace tree is not available")
    matches, how = _match_workspace(rel, ctx.workspace)
    outputs["matched_count"] = len(matches)
    if not matches:
        return Verdict(False, f"workspace has no file {rel}", outputs)
    if len(matches) > 1:
        listing = ", ".join(matches[:5])
        return Verdict(False, f"workspace has no file {rel}; basename is ambiguous ({listing})", outputs)
    path = matches[0]
    outputs["matched_path"] = path
    outputs["matched_by"] = how
    if contains is None and not contains_all and not contains_any:
        return Verdict(True, f"workspace file {path} is present", outputs)
    stream = ctx.workspace.open(path)
    text = None if stream is None else read_text_head(stream, WORKSPACE_READ_LIMIT)[0]
    if text is None:
        return Verdict(False, f"workspace file {path} is not UTF-8 text", outputs)
    if contains is not None:
        if contains in text:
            return Verdict(True, f"workspace file {path} contains {contains!r}", outputs)
        return Verdict(False, f"workspace file {path} does not contain {contains!r}", outputs)
    folded = fold(text)
    missing = [s for s in contains_all if fold(s) not in folded]
    if missing:
        return Verdict(False, f"workspace file {path} lacks {', '.join(map(repr, missing))}", outputs)
    if contains_any and not any(fold(s) in folded for s in contains_any):
        return Verdict(False, f"workspace file {path} contains none of {', '.join(map(repr, contains_any))}", outputs)
    return Verdict(True, f"workspace file {path} contains the required text", outputs)


KINDS: dict[str, Callable[[Mapping[str, Any], CheckContext], Verdict]] = {
    "final_response_present": final_response_present,
    "tool_call_count": tool_call_count,
    "file_exists": file_exists,
    "file_contains": file_contains,
    "path_exists": path_exists,
    "status_is": status_is,
    "output_artifact_present": output_artifact_present,
    "openclaw_workspace_file_present": openclaw_workspace_file_present,
}

DEFAULT_DIMENSIONS: dict[str, list[str]] = {
    "final_response_present": ["process"],
    "tool_call_count": ["efficiency", "process"],
    "file_exists": ["task"],
    "file_contains": ["task"],
    "path_exists": ["task"],
    "status_is": ["process"],
    "output_artifact_present": ["task"],
    "openclaw_workspace_file_present": [],
    "python_hook": [],
}

HOST_PATH_KINDS = ("file_exists", "file_contains", "path_exists")
