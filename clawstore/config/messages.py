"""Message resolution: expand `source:` files into messages and inject attachments (llm_probe).

The same functions serve validation (every source file is parsed at load time, so `claw validate`
catches a bad one) and campaign expansion (which reuses the parsed result; nothing is read twice).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawstore.config.containment import escapes, not_a_file, outside_message
from clawstore.config.error_text import yaml_type
from clawstore.config.ids import MESSAGE_ROLES
from clawstore.config.limits import MAX_SOURCE_TOTAL_BYTES
from clawstore.config.models import Message
from clawstore.config.yamlio import YamlProblem, parse_json_text, parse_yaml_text, read_text
from clawstore.errors import quoted


@dataclass(frozen=True)
class ResolvedMessage:
    role: str
    content: str
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, "name": self.name, "metadata": self.metadata}


@dataclass(frozen=True)
class Attachment:
    name: str  # file basename, as shown to the model
    path: Path
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class MessageProblem(Exception):
    """A message source cannot be used; `field` is relative to the referencing message."""

    def __init__(self, message: str, field: str = "source"):
        super().__init__(message)
        self.field = field


def case_path(case_dir: Path, value: str) -> Path:
    """A path written in a case: `~` expanded, relative paths taken from the test.yaml directory."""
    expanded = os.path.expanduser(value) if value.startswith("~") else value
    return Path(expanded) if os.path.isabs(expanded) else case_dir / expanded


def _parse_source(path: Path, fmt: str | None) -> Any:
    if fmt is None:
        fmt = "json" if path.suffix.lower() == ".json" else "yaml"  # unknown suffixes read as YAML
    text = read_text(path)
    return parse_json_text(text) if fmt == "json" else parse_yaml_text(text)


def _from_mapping(item: dict[str, Any], ref: Message, where: str, warnings: list[str] | None = None) -> ResolvedMessage:
    role = item.get("role", ref.role)
    if not isinstance(role, str) or role not in MESSAGE_ROLES:
        raise MessageProblem(f"{where}role: expected one of {', '.join(sorted(MESSAGE_ROLES))}, "
                             f"got {quoted(role)}")
    content = item.get("content", "")
    if not isinstance(content, str):
        raise MessageProblem(f"{where}content: expected a string, got {yaml_type(content)}")
    name = item.get("name", ref.name)
    if name is not None and not isinstance(name, str):
        raise MessageProblem(f"{where}name: expected a string, got {yaml_type(name)}")
    metadata = {k: v for k, v in item.items() if k not in ("role", "content", "name")}
    if "content" not in item and warnings is not None:  # (valid, as the reference system has it: likely a typo)
        became = ", ".join(map(str, metadata)) or "none"
        warnings.append(f"{where.rstrip('.: ')}: no `content`, the message is sent empty (keys made metadata: "
                        f"{became})")
    return ResolvedMessage(role=role, content=content, name=name, metadata=metadata)


def expand_source(case_dir: Path, message: Message, root_real: Path | None = None,
                  warnings: list[str] | None = None) -> list[ResolvedMessage]:
    """The messages a `source:` file stands for (a string, one mapping, or a list of mappings).

    With `root_real`, a file that resolves outside it is refused before it is read; `warnings` gets a line for each
    mapping without `content`."""
    assert message.source is not None
    path = case_path(case_dir, message.source.path)
    outside = escapes(path, root_real) if root_real is not None else None
    if outside is not None:
        raise MessageProblem(outside_message(message.source.path, outside), "source.path")
    if (why := not_a_file(path, message.source.path, "paths are relative to test.yaml")) is not None:
        raise MessageProblem(why, "source.path")
    label = message.source.path
    try:
        data = _parse_source(path, message.source.format)
    except YamlProblem as exc:
        raise MessageProblem(f"{label}: {exc}") from None
    if isinstance(data, str):
        return [ResolvedMessage(role=message.role, content=data, name=message.name)]
    if isinstance(data, dict):
        return [_from_mapping(data, message, f"{label}: ", warnings)]
    if isinstance(data, list):
        out = []
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                raise MessageProblem(f"{label}: [{index}]: expected a message mapping, got {yaml_type(item)}")
            out.append(_from_mapping(item, message, f"{label}: [{index}].", warnings))
        return out
    raise MessageProblem(f"{label}: expected a string, a message mapping or a list of them, got {yaml_type(data)}")


def expand_sources(case_dir: Path, messages: list[Message], field: str, root_real: Path | None = None,
                   warnings: list[tuple[str, str]] | None = None) -> tuple[
    dict[int, list[ResolvedMessage]], list[tuple[str, str]]
]:
    """Expand the messages that name a `source:` file; returns ({index: messages}, problems); `warnings` gets
    (field path, message) for each mapping without `content`."""
    expanded: dict[int, list[ResolvedMessage]] = {}
    problems: list[tuple[str, str]] = []
    total = 0  # bytes of the source files named so far (a file named twice counts twice: each is held)
    for index, message in enumerate(messages):
        if message.source is None:
            continue
        try:
            total += os.stat(case_path(case_dir, message.source.path)).st_size
        except OSError:
            pass  # (expand_source says why)
        if total > MAX_SOURCE_TOTAL_BYTES:
            problems.append((f"{field}[{index}].source", f"the source files named in {field} add up to more than "
                             f"{MAX_SOURCE_TOTAL_BYTES // 2**20} MiB (a file named many times counts each time)"))
            break
        said: list[str] = []
        try:
            expanded[index] = expand_source(case_dir, message, root_real, said)
        except MessageProblem as exc:
            problems.append((f"{field}[{index}].{exc.field}", str(exc)))
        if warnings is not None:
            warnings.extend((f"{field}[{index}]", line) for line in said)
    return expanded, problems


def assemble(messages: list[Message], expanded: dict[int, list[ResolvedMessage]]) -> list[ResolvedMessage]:
    """Inline messages as written, `source:` messages replaced by what their file holds."""
    out: list[ResolvedMessage] = []
    for index, message in enumerate(messages):
        if message.source is None:
            out.append(ResolvedMessage(role=message.role, content=message.content or "", name=message.name))
        else:
            out.extend(expanded[index])
    return out


def resolve_messages(case_dir: Path, messages: list[Message], field: str) -> tuple[
    list[ResolvedMessage], list[tuple[str, str]]
]:
    """Expand every message; returns (messages, problems as (field path, message))."""
    expanded, problems = expand_sources(case_dir, messages, field)
    return ([] if problems else assemble(messages, expanded)), problems


def attachment_message(attachment: Attachment) -> ResolvedMessage:
    name = attachment.name
    content = (
        f"Attached context file: {name}\n\n--- BEGIN ATTACHMENT {name} ---\n"
        f"{attachment.text}\n--- END ATTACHMENT {name} ---"
    )
    return ResolvedMessage(
        role="user", content=content, metadata={"attachment": {"name": name, "byte_size": len(attachment.data)}}
    )


def inject_attachments(messages: list[ResolvedMessage], attachments: list[Attachment]) -> list[ResolvedMessage]:
    """Attachments become user messages just before the first user message (the config reference), in list order;
    without a user message, right after the leading system messages."""
    if not attachments:
        return list(messages)
    cut = next((index for index, message in enumerate(messages) if message.role == "user"), None)
    if cut is None:
        cut = 0
        while cut < len(messages) and messages[cut].role == "system":
            cut += 1
    return [*messages[:cut], *(attachment_message(a) for a in attachments), *messages[cut:]]


def read_attachments(paths: list[Path]) -> list[Attachment]:
    out = []
    for path in paths:
        with open(path, "rb") as handle:
            out.append(Attachment(name=path.name, path=path, data=handle.read()))
    return out
