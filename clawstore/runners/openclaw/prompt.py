"""The `--message` text of each turn (docs/openclaw.md, "How a run executes").

Single turn: the numbered messages, then attachments, then hints. With `turns`: turn 1 carries the
messages as initial context plus its own user turn, attachments and hints; later turns carry only
their own text. One invocation per rendered text, all in one session.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _heading(prefix: str, message: Any) -> str:
    role = _field(message, "role") or "user"
    name = _field(message, "name")
    return f"{prefix} {role}" + (f" ({name})" if name else "")


def _content(message: Any) -> str:
    content = _field(message, "content")
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True)


def _attachment_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _context_sections(attachments: Sequence[tuple[str, bytes]], hints: dict[str, Any]) -> list[str]:
    sections = [f"[attachment] {name}\n{_attachment_text(data)}\n" for name, data in attachments]
    if hints:
        sections.append("[openclaw_hints]\n" + json.dumps(hints, indent=2, sort_keys=True))
    return sections


def _numbered(messages: Sequence[Any]) -> list[str]:
    return [f"{_heading(f'[{i}]', m)}\n{_content(m)}\n" for i, m in enumerate(messages)]


def render_turns(messages: Sequence[Any], turns: Sequence[Any], attachments: Sequence[tuple[str, bytes]],
                 hints: dict[str, Any]) -> list[str]:
    """One message text per agent invocation."""
    context = _context_sections(attachments, hints)
    if not turns:
        return ["\n".join(_numbered(messages) + context).strip()]
    first: list[str] = []
    if messages:
        first.append("[initial_context]")
        first.extend(_numbered(messages))
    first.append(f"{_heading('[user_turn]', turns[0])}\n{_content(turns[0])}\n")
    rendered = ["\n".join(first + context).strip()]
    for turn in turns[1:]:
        rendered.append(f"{_heading('[user_turn]', turn)}\n{_content(turn)}".strip())
    return rendered
