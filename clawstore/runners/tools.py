"""The llm_probe tools (exec_shell, write_file, read_file, web_search), contained in a per-run sandbox.

Only the tools a case enables may run; every other name gets a tool error. Outputs name paths as
the run sees them (`/tmp/x`), never host paths, so that a run's record does not depend on where
its sandbox happened to live.
"""

from __future__ import annotations

import codecs
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clawstore.runners.sandbox import Sandbox, SandboxError, to_sandbox_path

TOOL_NAMES = ("exec_shell", "write_file", "read_file", "web_search")
SHELL_TIMEOUT_S = 15.0
READ_LIMIT = 1024 * 1024
SEARCH_URL = "https://html.duckduckgo.com/html/"
SEARCH_PAGE_MAX = 2 * 1024 * 1024  # bytes of a search page read (DuckDuckGo's are ~50 KB)

_DESCRIPTIONS = {
    "exec_shell": "Executes a shell command (bash) on Linux and returns its exit code, stdout and stderr.",
    "read_file": "Reads a UTF-8 text file and returns its contents.",
    "write_file": "Writes UTF-8 text content to a file, creating parent directories if needed.",
    "web_search": "Searches the public web and returns a short list of results (title and URL).",
}
_PARAMS: dict[str, dict[str, str]] = {
    "exec_shell": {"command": "The shell command to run."},
    "read_file": {"path": "Path of the file to read."},
    "write_file": {"path": "Path of the file to write.", "content": "Text to write."},
    "web_search": {"query": "What to search for."},
}


def tool_spec(name: str) -> dict[str, Any]:
    """The OpenAI `tools` entry for one tool."""
    params = _PARAMS[name]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": _DESCRIPTIONS[name],
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string", "description": text} for key, text in params.items()},
                "required": list(params),
            },
        },
    }


def enabled_tools(names: Sequence[str]) -> list[str]:
    """Known tool names in the case's order, duplicates and unknown names dropped."""
    seen: list[str] = []
    for name in names:
        if name in TOOL_NAMES and name not in seen:
            seen.append(name)
    return seen


@dataclass(frozen=True)
class ToolOutcome:
    status: str  # success | error
    output: dict[str, Any]

    @classmethod
    def error(cls, message: str, error_type: str) -> ToolOutcome:
        return cls("error", {"error": message, "error_type": error_type})


class ToolBox:
    """Dispatches tool calls for one run; refuses tools the case did not enable."""

    def __init__(self, sandbox: Sandbox | None, enabled: Sequence[str], *, network: bool = False,
                 shell_timeout: float = SHELL_TIMEOUT_S):
        self.sandbox = sandbox  # None only with no tool enabled: every call is refused before using it
        self.enabled = enabled_tools(enabled)
        self.network = network
        self.shell_timeout = shell_timeout

    def specs(self) -> list[dict[str, Any]]:
        return [tool_spec(name) for name in self.enabled]

    def run(self, name: str, arguments: Any) -> ToolOutcome:
        if name not in TOOL_NAMES:
            return ToolOutcome.error(f"Unsupported tool '{name}'", "unsupported_tool")
        if name not in self.enabled:
            return ToolOutcome.error(f"Tool '{name}' is not enabled for this case", "tool_not_enabled")
        if not isinstance(arguments, dict):
            return ToolOutcome.error("arguments must be a JSON object", "invalid_arguments")
        for key in _PARAMS[name]:
            if not isinstance(arguments.get(key), str):
                return ToolOutcome.error(f"argument '{key}' must be a string", "invalid_arguments")
        try:
            return getattr(self, f"_{name}")(arguments)
        except SandboxError as exc:
            return ToolOutcome.error(str(exc), "sandbox_error")
        except TimeoutError as exc:
            return ToolOutcome.error(str(exc), "timeout")
        except OSError as exc:
            # Never echo host paths: strerror alone ("No such file or directory") is enough.
            return ToolOutcome.error(exc.strerror or type(exc).__name__, type(exc).__name__)
        except UnicodeDecodeError:
            return ToolOutcome.error("file is not valid UTF-8 text", "UnicodeDecodeError")

    def _exec_shell(self, args: dict[str, str]) -> ToolOutcome:
        result = self.sandbox.run_shell(args["command"], self.shell_timeout, network=self.network)
        return ToolOutcome("success", result.to_json())

    def _read_file(self, args: dict[str, str]) -> ToolOutcome:
        host = self.sandbox.resolve(args["path"])
        if host.is_dir():
            return ToolOutcome.error(f"{args['path']} is a directory", "IsADirectoryError")
        if host.exists() and not host.is_file():
            # A FIFO or device left by the shell would block the harness: regular files only.
            return ToolOutcome.error(f"{args['path']} is not a regular file", "NotARegularFile")
        with open(host, "rb") as handle:
            data = handle.read(READ_LIMIT + 1)
        truncated = len(data) > READ_LIMIT
        # Cut at the limit, a text may end inside a character: that one is left out, not taken for
        # bytes that are not UTF-8 (an incremental decoder holds it back; invalid bytes still raise).
        content = codecs.getincrementaldecoder("utf-8")().decode(data[:READ_LIMIT], final=not truncated)
        output: dict[str, Any] = {"path": to_sandbox_path(self.sandbox.root, host), "content": content}
        if truncated:
            output["truncated"] = True
        return ToolOutcome("success", output)

    def _write_file(self, args: dict[str, str]) -> ToolOutcome:
        host = self.sandbox.resolve(args["path"])
        if host == self.sandbox.root or host.is_dir():
            return ToolOutcome.error(f"{args['path']} is a directory", "IsADirectoryError")
        if host.exists() and not host.is_file():
            return ToolOutcome.error(f"{args['path']} is not a regular file", "NotARegularFile")
        host.parent.mkdir(parents=True, exist_ok=True)
        data = args["content"].encode("utf-8")
        host.write_bytes(data)
        return ToolOutcome("success", {"path": to_sandbox_path(self.sandbox.root, host),
                                       "bytes_written": len(data)})

    def _web_search(self, args: dict[str, str]) -> ToolOutcome:
        if not self.network:
            return ToolOutcome.error("network access is disabled for this run", "network_disabled")
        import httpx  # (here: `claw plan` reads TOOL_NAMES, and httpx was ~40 ms of its start)

        try:
            with httpx.stream("GET", SEARCH_URL, params={"q": args["query"]}, timeout=15.0,
                              headers={"User-Agent": "clawstore/0.1 (llm_probe web_search)"}) as response:
                response.raise_for_status()
                page = bytearray()
                for chunk in response.iter_bytes():  # the first SEARCH_PAGE_MAX bytes: results come first
                    page += chunk
                    if len(page) >= SEARCH_PAGE_MAX:
                        break
                text = bytes(page[:SEARCH_PAGE_MAX]).decode(response.encoding or "utf-8", errors="replace")
        except httpx.HTTPError as exc:
            return ToolOutcome.error(f"web search failed: {exc}", type(exc).__name__)
        return ToolOutcome("success", {"query": args["query"], "results": _scrape_results(text)})


_RESULT_CLASS = 'class="result__a"'
_HREF = re.compile(r'\bhref="([^"]*)"')
_TAG = re.compile(r"<[^>]+>")
_LINK_MAX = 2048  # a result link's tag, and its title: longer ones are not result links


def _scrape_results(page: str, limit: int = 5) -> list[dict[str, str]]:
    """The first `limit` result links (`<a ... class="result__a" ... href="URL">TITLE</a>`) of a search
    page. Each look around a result's class is bounded, so the scrape is linear whatever the page holds
    (a pattern with `(.*?)</a>` ran to the end of the page from every link that never closes)."""
    results: list[dict[str, str]] = []
    at = page.find(_RESULT_CLASS)
    while at != -1 and len(results) < limit:
        start = page.rfind("<a", max(0, at - _LINK_MAX), at)
        end = page.find(">", at, at + _LINK_MAX)
        close = page.find("</a>", end, end + _LINK_MAX) if end != -1 else -1
        href = _HREF.search(page, start, end) if start != -1 and close != -1 else None
        if href is not None and page[start + 2:start + 3].isspace() and ">" not in page[start:at]:
            results.append({"title": html.unescape(_TAG.sub("", page[end + 1:close])).strip(),
                            "url": html.unescape(href.group(1))})
        at = page.find(_RESULT_CLASS, at + len(_RESULT_CLASS))
    return results
