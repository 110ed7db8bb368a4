"""Reading what OpenClaw printed: the JSON result of a turn, its usage, its visible answer."""

from __future__ import annotations

import mmap
import os
import posixpath
import re
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from clawstore.providers.usage import TURN_NO_RESULT, TURN_NOT_REPORTED, Usage, tokens_reported
from clawstore.runners.openclaw.container import Invocation
from clawstore.runners.pricing import priced_cost
from clawstore.values import jsontext
from clawstore.values.bounds import (
    MAX_RECORD_COST_USD,
    MAX_RECORD_TOKENS,
    MAX_TOOL_CALLS,
    amount_problem,
    count_problem,
)
from clawstore.values.jsontext import json_objects_in

_MARKERS = ("payloads", "finalAssistantVisibleText", "finalPromptText")
USAGE_FIELDS = ("input", "output", "total", "cacheRead", "cacheWrite")
NOT_REPORTED = TURN_NOT_REPORTED
NO_RESULT = TURN_NO_RESULT
REDACTED = "[redacted]"
REDACTED_BYTES = REDACTED.encode()
REDACT_CHUNK = 1 << 20  # bytes of a file redacted at a time
REASON_CHARS = 300  # of a failed turn's reason in its error message (the whole stderr is in its metadata)
_MEDIA_TYPES = {".md": "text/markdown", ".txt": "text/plain", ".diff": "text/x-diff",
                ".json": "application/json", ".csv": "text/csv", ".html": "text/html"}


def payload_text(inv: Invocation) -> str:
    """What the turn answered: stdout, or stderr when stdout is empty (older OpenClaw releases)."""
    return inv.stdout if inv.stdout.strip() else inv.stderr


def find_payload(text: str) -> dict[str, Any] | None:
    """The OpenClaw result object in a turn's output (log lines may surround it)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            whole = jsontext.loads_reply(stripped)
        except ValueError:
            whole = None
        if isinstance(whole, dict):
            return whole
    for obj in json_objects_in(text):
        meta = obj.get("meta")
        if any(k in obj for k in _MARKERS) or (isinstance(meta, dict) and (
                "agentMeta" in meta or "toolSummary" in meta)):
            return obj
    return None


def _meta(payload: dict[str, Any]) -> dict[str, Any]:
    meta = payload.get("meta")
    return meta if isinstance(meta, dict) else {}


def failure_reason(payload: dict[str, Any] | None, stderr: str) -> str:
    """Why a turn failed, in one line: the error OpenClaw's result names, else stderr's last line."""
    error = (payload or {}).get("error")
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message.strip():
        message = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    return " ".join(message.split())[:REASON_CHARS]


def visible_text(payload: dict[str, Any] | None) -> str:
    """The assistant's visible answer: finalAssistantVisibleText, else the payload texts joined."""
    if not payload:
        return ""
    for source in (payload, _meta(payload)):
        text = source.get("finalAssistantVisibleText")
        if isinstance(text, str) and text.strip():
            return text
    parts = [p.get("text") for p in payload.get("payloads") or [] if isinstance(p, dict)]
    return "\n\n".join(t for t in parts if isinstance(t, str) and t.strip())


def _agent_usage(payload: dict[str, Any] | None) -> Any:
    return ((_meta(payload or {}).get("agentMeta") or {}).get("usage")) or {}


def turns_reported(payloads: Sequence[dict[str, Any] | None]) -> bool:
    """Did every turn the agent answered count its input and its output tokens? OpenClaw's usage of a model call
    without `usage` is not 0: the run's tokens and cost are then unknown (providers/usage.py tokens_reported)."""
    return all(tokens_reported(_agent_usage(p), (("input",), ("output",))) for p in payloads if p)


def turn_usage(payload: dict[str, Any] | None) -> dict[str, int]:
    usage = _agent_usage(payload)
    counts = {}
    for name in USAGE_FIELDS:
        value = usage.get(name) if isinstance(usage, dict) else None
        counts[name] = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    return counts


def summed_usage(payloads: Sequence[dict[str, Any] | None]) -> dict[str, int]:
    total = dict.fromkeys(USAGE_FIELDS, 0)
    for payload in payloads:
        for name, value in turn_usage(payload).items():
            total[name] += value
    return total


def tool_calls(payloads: Sequence[dict[str, Any] | None]) -> int | None:
    """The tool calls the agent's turns reported (Σ `meta.toolSummary.calls`), or None when a started turn left no
    result or reported no count: never a partial sum read as the whole. The agent prints these, so a count that is
    not a plain integer within a reply's bounds is no count."""
    total = 0
    for payload in payloads:
        tools = _meta(payload or {}).get("toolSummary")
        calls = tools.get("calls") if isinstance(tools, dict) else None
        if type(calls) is not int or not 0 <= calls <= MAX_TOOL_CALLS:
            return None
        total += calls
    return total if payloads else None


def turns_usage(raw: dict[str, int], cost_usd: float | None) -> Usage:
    """The usage of the turns summed in `raw` (summed_usage), costing `cost_usd`."""
    total = raw["total"] or raw["input"] + raw["output"]
    return Usage(input_tokens=raw["input"], output_tokens=raw["output"], total_tokens=total,
                 cached_tokens=raw["cacheRead"], cache_write_tokens=raw["cacheWrite"], cost_usd=cost_usd)


def cost_usd(raw: dict[str, int], prices: dict[str, float] | None) -> float | None:
    """The turns' tokens at the declared prices; None when the model has no declared price (unknown, not free)."""
    if prices is None:
        return None
    return priced_cost(prices, raw["input"], raw["output"], raw["cacheRead"], raw["cacheWrite"])


def known_part(requests: int, tokens: dict[str, int], prices: dict[str, float] | None) -> dict[str, Any]:
    """What a run cut off with requests in flight spent at least (a usage's known part, values/costs.py CostSum): the
    `requests` its transcript shows answered, their `tokens` (transcript.py Answers), and these at the declared
    prices (none declared: no cost is known). Nothing past a record's bounds (it could not be stored)."""
    cost = cost_usd(tokens, prices)
    part = {"answered_requests": requests, "input_tokens_known": tokens["input"],
            "output_tokens_known": tokens["output"], **({} if cost is None else {"cost_known_usd": cost})}
    if count_problem(part["input_tokens_known"], MAX_RECORD_TOKENS) or count_problem(
            part["output_tokens_known"], MAX_RECORD_TOKENS) or amount_problem(cost, MAX_RECORD_COST_USD):
        return {"answered_requests": requests}
    return part


def observable_summary(payload: dict[str, Any] | None, key_outputs: Sequence[str]) -> dict[str, Any]:
    meta = _meta(payload or {})
    prompt = (payload or {}).get("finalPromptText", meta.get("finalPromptText"))
    tools = meta.get("toolSummary") if isinstance(meta.get("toolSummary"), dict) else None
    return {
        "final_prompt_text": prompt if isinstance(prompt, str) else None,
        "final_assistant_visible_text": visible_text(payload) or None,
        "tool_summary": {"calls": tools.get("calls"), "failures": tools.get("failures"),
                         "tools": tools.get("tools")} if tools else None,
        "key_output_basenames": [posixpath.basename(p) for p in key_outputs],
    }


def expected_artifacts(hints: dict[str, Any]) -> list[str]:
    value = hints.get("expected_artifact") if isinstance(hints, dict) else None
    if isinstance(value, str):
        value = [value]
    return [v for v in value or [] if isinstance(v, str) and v.strip()]


def workspace_relative(path: str) -> str | None:
    """A hint path as a workspace-relative posix path; None if it leaves the workspace."""
    text = path.strip().replace("\\", "/")
    for prefix in ("/work/workspace/", "workspace/"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    norm = posixpath.normpath(text.lstrip("/"))
    if norm in (".", "") or norm.startswith("../") or norm == "..":
        return None
    return norm


def media_type(path: str) -> str | None:
    return _MEDIA_TYPES.get(Path(path).suffix.lower())


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redact_json(value: Any, secrets: Sequence[str]) -> Any:
    """`value` with every string redacted (keys included)."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [redact_json(v, secrets) for v in value]
    if isinstance(value, dict):
        return {redact(k, secrets): redact_json(v, secrets) for k, v in value.items()}
    return value


def redact_tree(directory: Path, secrets: Sequence[str]) -> list[str]:
    """Replace secret values in files the agent wrote (it can read its own environment). Files are
    mapped and rewritten a chunk at a time: one of a gigabyte costs no gigabyte of memory."""
    needles = sorted({s.encode("utf-8") for s in secrets if s}, key=len, reverse=True)
    if not needles:
        return []
    pattern = re.compile(b"|".join(re.escape(needle) for needle in needles))  # at one place, the longest
    touched = []
    for path in sorted(directory.rglob("*")):
        if not path.is_symlink() and path.is_file() and _redact_file(path, pattern, len(needles[0])):
            touched.append(path.relative_to(directory).as_posix())
    return touched


def _redact_file(path: Path, pattern: re.Pattern[bytes], longest: int) -> bool:
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return False
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if pattern.search(data) is None:  # the usual case: one pass, nothing copied
                return False
            fd, staged = tempfile.mkstemp(dir=path.parent, prefix=".claw-redacting-")
            os.fchmod(fd, stat.S_IMODE(os.fstat(fh.fileno()).st_mode))  # an executable stays one
            try:
                with open(fd, "wb") as out:
                    _write_redacted(data, out, pattern, longest)
            except BaseException:
                os.unlink(staged)
                raise
    os.replace(staged, path)
    return True


def _write_redacted(data: mmap.mmap, out: BinaryIO, pattern: re.Pattern[bytes], longest: int) -> None:
    """`data` with every secret replaced, a chunk at a time; a secret across the end of a chunk waits
    for the next one."""
    carry, pos = b"", 0
    while True:
        chunk = data[pos:pos + REDACT_CHUNK]
        pos += len(chunk)
        text = carry + chunk
        if pos >= len(data):
            out.write(pattern.sub(REDACTED_BYTES, text))
            return
        cut = len(text) - (longest - 1)  # a secret starting before here ends inside `text`
        while (across := _across(text, pattern, cut, longest)) is not None:
            cut = across
        out.write(pattern.sub(REDACTED_BYTES, text[:cut]))
        carry = text[cut:]


def _across(text: bytes, pattern: re.Pattern[bytes], cut: int, longest: int) -> int | None:
    """Where a secret that `cut` would split starts, if one does."""
    for found in pattern.finditer(text, max(cut - longest + 1, 0), cut + longest - 1):
        if found.start() < cut < found.end():
            return found.start()
    return None


def log_block(inv: Invocation) -> str:
    return (f"## {inv.step}\nreturncode: {inv.returncode}\ntimed_out: {str(inv.timed_out).lower()}\n"
            f"duration_s: {inv.duration_s:.3f}\n"
            + (f"engine_error: {inv.engine_error}\n" if inv.engine_error else "")
            + f"\n[stdout]\n{inv.stdout}\n\n[stderr]\n{inv.stderr}\n")
