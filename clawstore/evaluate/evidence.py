"""Read-only views of what a run left behind, and helpers to read a RunArtifact dict.

The evaluation functions never touch the store: the build layer adapts the store's captured trees
to these two small protocols. `DictSandboxFiles` / `DictWorkspaceFiles` are plain in-memory
implementations (tests, and small callers). A run may leave files of up to the tree limit (1 GiB,
host/run_limits.py): checks and the judge's excerpts read them as streams (`open`), a chunk at a time
(`read_head`, `stream_contains`), never whole.
"""

from __future__ import annotations

import codecs
import io
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any, BinaryIO, Protocol, runtime_checkable

from clawstore.values import jsontext
from clawstore.values.jsontext import json_objects_in
from clawstore.values.workspace_paths import normalize_relative_path

DIMENSIONS: tuple[str, ...] = ("task", "process", "autonomy", "closeness", "efficiency", "spark")


@runtime_checkable
class SandboxFiles(Protocol):
    """Files an llm_probe run wrote into its sandbox, addressed by the absolute path the run used."""

    def open(self, abs_path: str) -> BinaryIO | None:
        """The file as a stream (None: no such file); read to its end, a stored file is verified."""
        ...

    def exists(self, abs_path: str) -> bool: ...

    def is_file(self, abs_path: str) -> bool: ...

    def is_dir(self, abs_path: str) -> bool: ...


@runtime_checkable
class WorkspaceFiles(Protocol):
    """The final OpenClaw workspace tree, addressed by POSIX path relative to the workspace root."""

    def paths(self) -> Iterable[str]: ...

    def open(self, rel_path: str) -> BinaryIO | None: ...


READ_CHUNK = 1 << 20


def read_head(stream: BinaryIO, limit: int) -> tuple[bytes, int]:
    """The first `limit` bytes of a stream and its whole size, in bounded memory. Read to the end:
    a stored file is verified there, so nothing is taken from one that fails its check."""
    head = bytearray()
    size = 0
    with stream:
        while chunk := stream.read(READ_CHUNK):
            if len(head) < limit:
                head += chunk[:limit - len(head)]
            size += len(chunk)
    return bytes(head), size


def read_text_head(stream: BinaryIO, limit: int) -> tuple[str | None, int]:
    """The UTF-8 text of a stream's first `limit` bytes (decode_text: None when binary; a character cut
    by the limit is dropped) and its whole size, in bounded memory."""
    head, size = read_head(stream, limit + 1)  # one byte more: decode_text tells a cut character by it
    return decode_text(head, limit), size


def stream_contains(stream: BinaryIO, text: str) -> bool:
    """Does the stream, decoded as UTF-8 with undecodable bytes replaced (as `bytes.decode(errors=
    "replace")`), contain `text`? A chunk at a time, keeping the last len(text) - 1 characters so that
    a match across two chunks is found; read to the end (verified, see read_head)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    keep = len(text) - 1
    tail, found = "", False
    with stream:
        while True:
            chunk = stream.read(READ_CHUNK)
            window = tail + decoder.decode(chunk, final=not chunk)
            found = found or text in window
            tail = window[max(0, len(window) - keep):] if keep else ""
            if not chunk:
                return found


def _norm_abs(path: str) -> str:
    return posixpath.normpath("/" + path.replace("\\", "/").lstrip("/"))


class DictSandboxFiles:
    """SandboxFiles over `{absolute path: bytes}`; directories are implied by the file paths."""

    def __init__(self, files: Mapping[str, bytes | str]):
        self._files = {
            _norm_abs(p): (v.encode("utf-8") if isinstance(v, str) else bytes(v)) for p, v in files.items()
        }
        dirs: set[str] = {"/"}
        for p in self._files:
            parent = posixpath.dirname(p)
            while parent not in dirs:
                dirs.add(parent)
                parent = posixpath.dirname(parent)
        self._dirs = dirs

    def open(self, abs_path: str) -> BinaryIO | None:
        data = self._files.get(_norm_abs(abs_path))
        return None if data is None else io.BytesIO(data)

    def exists(self, abs_path: str) -> bool:
        p = _norm_abs(abs_path)
        return p in self._files or p in self._dirs

    def is_file(self, abs_path: str) -> bool:
        return _norm_abs(abs_path) in self._files

    def is_dir(self, abs_path: str) -> bool:
        return _norm_abs(abs_path) in self._dirs


class DictWorkspaceFiles:
    """WorkspaceFiles over `{relative path: bytes}`."""

    def __init__(self, files: Mapping[str, bytes | str]):
        self._files = {
            normalize_relative_path(p): (v.encode("utf-8") if isinstance(v, str) else bytes(v))
            for p, v in files.items()
        }

    def paths(self) -> Iterable[str]:
        return sorted(self._files)

    def open(self, rel_path: str) -> BinaryIO | None:
        data = self._files.get(normalize_relative_path(rel_path))
        return None if data is None else io.BytesIO(data)


# Classes whose every instance satisfies a protocol (its methods are the class's own): an isinstance against a
# runtime-checkable protocol looks each method up (~20 us; once or twice a checks or judge node), a set look-up not.
_SATISFIES: dict[type, set[type]] = {SandboxFiles: set(), WorkspaceFiles: set()}
_METHODS = {SandboxFiles: ("open", "exists", "is_file", "is_dir"), WorkspaceFiles: ("paths", "open")}


def _satisfies(value: object, protocol: type) -> bool:
    known = _SATISFIES[protocol]
    if type(value) in known:
        return True
    if not isinstance(value, protocol):
        return False
    if all(callable(getattr(type(value), name, None)) for name in _METHODS[protocol]):
        known.add(type(value))
    return True


def as_sandbox(value: SandboxFiles | Mapping[str, bytes | str] | None) -> SandboxFiles | None:
    """Accept a protocol object or a plain mapping."""
    if value is None or _satisfies(value, SandboxFiles):
        return value
    return DictSandboxFiles(value)


def as_workspace(value: WorkspaceFiles | Mapping[str, bytes | str] | None) -> WorkspaceFiles | None:
    if value is None or _satisfies(value, WorkspaceFiles):
        return value
    return DictWorkspaceFiles(value)


# ---------------------------------------------------------------------------------------------
# Reading the RunArtifact dict


def runner_type(artifact: Mapping[str, Any]) -> str:
    identity = artifact.get("identity") or {}
    return str(identity.get("runner_type") or "")


def trace_events(artifact: Mapping[str, Any], event_type: str | None = None) -> list[dict[str, Any]]:
    events = [e for e in artifact.get("trace") or [] if isinstance(e, dict)]
    if event_type is None:
        return events
    return [e for e in events if e.get("event_type") == event_type]


_VISIBLE_KEYS = ("content", "message", "response", "text")
_OPENCLAW_MARKERS = ("payloads", "finalAssistantVisibleText", "finalPromptText", "meta")


def openclaw_payload(text: str) -> dict[str, Any] | None:
    """The OpenClaw JSON result embedded in a stdout/stderr text, if there is one."""
    if "{" not in text or not any(f'"{marker}"' in text for marker in _OPENCLAW_MARKERS):
        return None  # cheap exit: scanning every brace of a long text costs O(n^2)
    for obj in json_objects_in(text):
        if any(k in obj for k in _OPENCLAW_MARKERS):
            return obj
    return None


def payload_visible_text(payload: Mapping[str, Any]) -> str:
    """Assistant-visible text of an OpenClaw payload ('' when it carries none)."""
    visible = payload.get("finalAssistantVisibleText")
    if isinstance(visible, str) and visible.strip():
        return visible
    parts = [
        p.get("text")
        for p in payload.get("payloads") or []
        if isinstance(p, dict) and isinstance(p.get("text"), str) and p.get("text").strip()
    ]
    if parts:
        return "\n\n".join(parts)
    for key in _VISIBLE_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def visible_text(content: Any, runner: str = "openclaw") -> tuple[str, bool]:
    """(text a user would see, whether `content` was a raw payload without any visible text).

    Only OpenClaw output is unwrapped: its CLI prints a JSON envelope around the answer. An
    llm_probe answer is the model's own text, JSON or not, and is taken as it is.
    """
    if not isinstance(content, str):
        return "", False
    stripped = content.strip()
    if not stripped:
        return "", False
    if runner != "openclaw":
        return content, False
    # (Text unwrapped from JSON can hold a lone surrogate escape, which no record can: U+FFFD instead.)
    payload = openclaw_payload(stripped)
    if payload is not None:
        text = jsontext.replace_lone_surrogates(payload_visible_text(payload))
        return text, not text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            obj = jsontext.loads(stripped)
        except ValueError:
            return content, False
        if isinstance(obj, dict):
            for key in _VISIBLE_KEYS:
                value = obj.get(key)
                if isinstance(value, str) and value.strip():
                    return jsontext.replace_lone_surrogates(value), False
            if "error" in obj:
                return "", True  # an error envelope, not an answer
    return content, False


def final_output_text(artifact: Mapping[str, Any]) -> tuple[str, bool]:
    """Visible text of the last non-blank `final_output` event, and whether it was a raw payload."""
    runner = runner_type(artifact)
    for event in reversed(trace_events(artifact, "final_output")):
        content = event.get("content")
        if isinstance(content, str) and content.strip():
            return visible_text(content, runner)
    return "", False


def assistant_messages(artifact: Mapping[str, Any]) -> list[str]:
    runner = runner_type(artifact)
    out: list[str] = []
    for event in trace_events(artifact, "message"):
        if event.get("role") == "assistant":
            text, _ = visible_text(event.get("content"), runner)
            if text.strip():
                out.append(text)
    return out


def openclaw_observable_summary(artifact: Mapping[str, Any]) -> dict[str, Any]:
    meta = artifact.get("runner_metadata") or {}
    oc = meta.get("openclaw") or {}
    summary = (oc.get("metadata") or {}).get("observable_summary") if isinstance(oc, dict) else None
    return summary if isinstance(summary, dict) else {}


def expected_artifact_hints(artifact: Mapping[str, Any]) -> list[str]:
    """`input.context.openclaw.expected_artifact` as recorded in the run request (str or list)."""
    request = artifact.get("request") or {}
    context = (request.get("metadata") or {}).get("input_context") or {}
    hint = (context.get("openclaw") or {}).get("expected_artifact") if isinstance(context, dict) else None
    if isinstance(hint, str):
        return [hint]
    if isinstance(hint, list):
        return [h for h in hint if isinstance(h, str)]
    return []


def decode_text(data: bytes | None, limit: int | None = None) -> str | None:
    """Strict UTF-8 decode of (the head of) `data`; None when absent or binary."""
    if data is None:
        return None
    head = data if limit is None else data[:limit]
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut by the limit is not binary content
        if limit is not None and len(data) > limit and exc.start >= len(head) - 3:
            return head[: exc.start].decode("utf-8", errors="strict")
        return None
