"""The llm_probe tools (exec_shell, write_file, read_file, web_search), contained in a per-run sandbox."""

from __future__ import annotations

TOOL_NAMES = ("exec_shell", "write_file", "read_file", "web_search")
