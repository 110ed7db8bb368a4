"""What the judge is shown about a run: the subject's answer, its work and its failures.

Built from the RunArtifact dict plus the run's captured files. Blind by construction: nothing from
`request`, `provider`, `usage`, `timing` or `identity` is copied, and the subject model's names are
scrubbed from free text. Every long text is cut at a fixed length, so the same run always yields
the same evidence (and the same judge key).
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from clawstore.evaluate.evidence import (
    SandboxFiles,
    WorkspaceFiles,
    as_sandbox,
    as_workspace,
    expected_artifact_hints,
    final_output_text,
    normalize_relative_path,
    openclaw_observable_summary,
    read_text_head,
    runner_type,
    trace_events,
    visible_text,
)
from clawstore.evaluate.redact import environment_secrets, holds_no_secret, json_holds_no_secret, redact_value
from clawstore.values import jsontext

FINAL_OUTPUT_LIMIT = 12_000
EXCERPT_LIMIT = 4_000
MESSAGE_LIMIT = 1_200
TOOL_ARGUMENT_LIMIT = 800
TOOL_RESULT_LIMIT = 1_000
FAILURE_DETAIL_LIMIT = 2_000
MAX_MESSAGES = 20
MAX_TOOL_EVENTS = 60
MAX_ARTIFACTS = 8
MAX_LISTING = 50
SUBJECT_PLACEHOLDER = "[subject model]"


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Head of `text` up to `limit` chars plus a marker saying how much was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n… [truncated {len(text) - limit} chars]", True


def content_type(text: str) -> str:
    stripped = text.lstrip()
    lowered = stripped[:200].lower()
    if lowered.startswith("<!doctype html") or lowered.startswith("<html"):
        return "html"
    if stripped[:1] in "{[":
        try:
            jsontext.loads(stripped)
            return "json"
        except ValueError:
            pass
    if re.search(r"(?m)^(#{1,6} |[-*] |\d+\. |```|\|.*\|)", text):
        return "markdown"
    return "text"


def _text_block(text: str, limit: int) -> dict[str, Any]:
    cut, truncated = truncate(text, limit)
    return {"content_type": content_type(text), "char_count": len(text), "text": cut, "truncated": truncated}


def _keep_ends(items: list[Any], limit: int) -> tuple[list[Any], int]:
    """First and last `limit // 2` items; how many were dropped in between."""
    if len(items) <= limit:
        return items, 0
    half = limit // 2
    return items[:half] + items[-half:], len(items) - 2 * half


def _compact(value: Any, limit: int, secrets: list[str] | None) -> str:
    """A tool's arguments or result as text, cut at `limit`; redacted while still a value (`secrets`: the environment's,
    None when nothing is redacted)."""
    if isinstance(value, str):
        return truncate(value, limit)[0]
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    # The text rules, run over this text later, find a secret-named pair in it unless a string holds a quote (escaped
    # here): a string's own JSON, `{"stdout": "{\"password\": \"1\"}"}`, is a level deeper. Then it is redacted while
    # still a value. (Also looking when the text holds any escape, or is cut, cost +34 % of a judge's evidence made
    # from tool results holding newlines and the word "token", for what main missed as well: docs/evaluation.md.)
    if secrets is not None and '\\"' in text and not json_holds_no_secret(text, secrets):
        text = json.dumps(redact_value(value, secrets), ensure_ascii=False, sort_keys=True, default=str)
    return truncate(text, limit)[0]


def _search_summary(output: Mapping[str, Any]) -> str | None:
    results = output.get("results")
    if not isinstance(results, list):
        return None
    domains, titles = [], []
    for item in results[:5]:
        if isinstance(item, dict):
            url = str(item.get("url") or "")
            host = re.sub(r"^[a-z]+://", "", url).split("/")[0]
            if host:
                domains.append(host)
            if item.get("title"):
                titles.append(str(item["title"])[:120])
    query = output.get("query")
    return (
        f"search results for {query!r}: {len(results)} result(s); "
        f"sources: {', '.join(domains) or 'none'}; titles: {' | '.join(titles) or 'none'}"
    )


def _result_summary(tool: str, output: Any, secrets: list[str] | None) -> str:
    if isinstance(output, dict) and set(output) <= {"status", "output"} and "output" in output:
        output = output["output"]  # the tool envelope {status, output}
    if isinstance(output, dict) and ("search" in tool or tool == "web"):
        summary = _search_summary(output)
        if summary:
            return summary
    return _compact(output, TOOL_RESULT_LIMIT, secrets)


def _tool_activity(artifact: Mapping[str, Any], secrets: list[str] | None) -> dict[str, Any]:
    names: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    for event in trace_events(artifact):
        kind = event.get("event_type")
        if kind == "tool_call":
            tool = str(event.get("tool_name") or "unknown")
            names[str(event.get("call_id"))] = tool
            args = event.get("parsed_arguments")
            if args is None:
                args = event.get("raw_arguments")
            events.append({"kind": "call", "tool": tool, "call_id": event.get("call_id"),
                           "arguments": _compact(args if args is not None else {}, TOOL_ARGUMENT_LIMIT, secrets)})
        elif kind == "tool_result":
            meta_name = (event.get("metadata") or {}).get("tool_name")
            tool = names.get(str(event.get("call_id"))) or str(meta_name or "unknown")
            summary = _result_summary(tool, event.get("output"), secrets)
            events.append({"kind": "result", "tool": tool, "call_id": event.get("call_id"),
                           "status": event.get("status"), "summary": summary})
    calls = [e for e in events if e["kind"] == "call"]
    activity: dict[str, Any] = {
        "source": "trace",
        "tool_call_count": len(calls),
        "tools_used": sorted({e["tool"] for e in calls}),
    }
    if not calls and runner_type(artifact) == "openclaw":
        summary = openclaw_observable_summary(artifact).get("tool_summary") or {}
        tools = [str(t) for t in summary.get("tools") or [] if isinstance(t, str | int)]
        count = summary.get("calls")
        if tools or isinstance(count, int):
            activity.update(
                source="openclaw_tool_summary",
                tool_call_count=count if isinstance(count, int) and not isinstance(count, bool) else len(tools),
                tools_used=sorted(set(tools)),
                failures=summary.get("failures") if isinstance(summary.get("failures"), int) else None,
            )
    kept, dropped = _keep_ends(events, MAX_TOOL_EVENTS)
    activity["events"] = kept
    activity["events_omitted"] = dropped
    return activity


def _assistant_messages(artifact: Mapping[str, Any], final_text: str) -> tuple[list[dict[str, Any]], int]:
    blocks = []
    runner = runner_type(artifact)
    for event in trace_events(artifact, "message"):
        if event.get("role") != "assistant":
            continue
        text, _ = visible_text(event.get("content"), runner)
        if text.strip() and text.strip() != final_text.strip():  # the final answer is shown once
            blocks.append(_text_block(text, MESSAGE_LIMIT))
    return _keep_ends(blocks, MAX_MESSAGES)


def _artifact_excerpts(
    artifact: Mapping[str, Any], sandbox: SandboxFiles | None, workspace: WorkspaceFiles | None
) -> list[dict[str, Any]]:
    wanted: list[tuple[str, str, str]] = []  # (kind, where, path)
    if workspace is not None:
        for ref in artifact.get("output_artifacts") or []:
            rel = ((ref or {}).get("metadata") or {}).get("workspace_relative_path")
            if isinstance(rel, str):
                wanted.append((str(ref.get("artifact_type") or "output_artifact"), "workspace", rel))
        for hint in expected_artifact_hints(artifact):
            wanted.append(("expected_artifact", "workspace", hint))
    if sandbox is not None:
        for event in trace_events(artifact, "tool_call"):
            args = event.get("parsed_arguments")
            if event.get("tool_name") == "write_file" and isinstance(args, dict) and isinstance(args.get("path"), str):
                wanted.append(("written_file", "sandbox", args["path"]))
    seen: set[tuple[str, str]] = set()
    out: list[dict[str, Any]] = []
    for kind, where, path in wanted:
        key_path = normalize_relative_path(path) if where == "workspace" else posixpath.normpath(path)
        if (where, key_path) in seen:
            continue
        seen.add((where, key_path))
        stream = workspace.open(key_path) if where == "workspace" and workspace is not None else None
        if where == "sandbox" and sandbox is not None and sandbox.is_file(key_path):
            stream = sandbox.open(key_path)
        if stream is None:
            out.append({"kind": kind, "name": key_path, "present": False, "excerpt": None})
            continue
        text, size = read_text_head(stream, EXCERPT_LIMIT * 4)  # its head only: a file may be a gigabyte
        entry: dict[str, Any] = {"kind": kind, "name": key_path, "present": True, "byte_size": size}
        if text is None:
            entry["excerpt"] = None  # binary: name and size only
        else:
            entry["excerpt"], entry["truncated"] = truncate(text, EXCERPT_LIMIT)
            entry["truncated"] = entry["truncated"] or size > EXCERPT_LIMIT * 4
        out.append(entry)
        if len(out) >= MAX_ARTIFACTS:
            break
    return out


def _material_failures(artifact: Mapping[str, Any]) -> list[dict[str, Any]]:
    error = artifact.get("error")
    if not isinstance(error, dict):
        return []
    meta = error.get("metadata") or {}
    detail = next(
        (meta[k] for k in ("stderr", "detail", "message", "stdout")
         if isinstance(meta.get(k), str) and meta[k].strip()),
        None,
    )
    failure = {k: error.get(k) for k in ("code", "message", "error_type", "retryable")}
    if detail:
        failure["detail"] = truncate(detail, FAILURE_DETAIL_LIMIT)[0]
    return [failure]


def subject_identity_strings(artifact: Mapping[str, Any]) -> list[str]:
    """Names of the subject model recorded in the artifact (what blind judging must hide)."""
    request = artifact.get("request") or {}
    provider = artifact.get("provider") or {}
    selection = (request.get("metadata") or {}).get("model_selection") or {}
    runner_meta = artifact.get("runner_metadata") or {}
    raw = [
        request.get("requested_model"),
        provider.get("provider_model_id"),
        runner_meta.get("model_id"),
        *(selection.get(k) for k in ("model_id", "label", "requested_model", "model_name", "openrouter_model")),
    ]
    found: set[str] = set()
    for value in raw:
        if not isinstance(value, str):
            continue
        for candidate in (value, value.rsplit("/", 1)[-1]):
            candidate = candidate.strip()
            # Only distinctive names: a plain word like "default" would mangle ordinary text.
            if len(candidate) >= 4 and _DISTINCTIVE.search(candidate):
                found.add(candidate)
    return sorted(found, key=lambda s: (-len(s), s))


_DISTINCTIVE = re.compile(r"[\d/_.-]")


@functools.lru_cache(maxsize=256)
def _name_pattern(name: str) -> re.Pattern[str]:
    """A name as `re.sub(re.escape(name), ..., flags=re.I)` finds it, compiled once (not looked up per string)."""
    return re.compile(re.escape(name), re.I)


def _scrub(value: Any, names: list[re.Pattern[str]]) -> Any:
    """Each name replaced in every string, one name after another (longest first, as `subject_identity_strings`
    orders them)."""
    if not names:
        return value
    if isinstance(value, str):
        for name in names:
            value = name.sub(SUBJECT_PLACEHOLDER, value)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, names) for v in value]
    return value


def build_judge_evidence(
    artifact: Mapping[str, Any],
    *,
    sandbox_files: SandboxFiles | Mapping[str, bytes | str] | None = None,
    workspace_files: WorkspaceFiles | Mapping[str, bytes | str] | None = None,
    redact_secrets: bool = True,
) -> dict[str, Any]:
    """The subject's evidence as a JSON-ready dict (input of `render_judge_prompt`)."""
    sandbox, workspace = as_sandbox(sandbox_files), as_workspace(workspace_files)
    final_text, raw_payload = final_output_text(artifact)
    messages, messages_omitted = _assistant_messages(artifact, final_text)
    evidence: dict[str, Any] = {
        "runner_type": runner_type(artifact),
        "run_status": artifact.get("status"),
        "final_output": _text_block(final_text, FINAL_OUTPUT_LIMIT) if final_text.strip() else None,
        "final_output_was_raw_payload": raw_payload,
        "assistant_messages": messages,
        "assistant_messages_omitted": messages_omitted,
        "tool_activity": _tool_activity(artifact, environment_secrets() if redact_secrets else None),
        "artifacts": _artifact_excerpts(artifact, sandbox, workspace),
        "material_failures": _material_failures(artifact),
    }
    if workspace is not None:
        paths = sorted(workspace.paths())
        evidence["workspace_files"] = paths[:MAX_LISTING]
        evidence["workspace_files_omitted"] = max(len(paths) - MAX_LISTING, 0)
    evidence = _scrub(evidence, [_name_pattern(name) for name in subject_identity_strings(artifact)])
    # (made here, so kept as it is when it holds no secret: redact_value's copy of it would be read once and dropped)
    return redact_value(evidence) if redact_secrets and not holds_no_secret(evidence) else evidence
