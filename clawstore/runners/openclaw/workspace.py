"""The agent workspace: template → store tree (with placeholders) → private checkout → final tree.

The template tree (the agent's `workspace/` plus placeholders for missing standard files) is what a
run starts from and part of its key, so it is computed once per agent, not copied per run. The diff
is taken against that tree: it shows exactly what the run changed (placeholders do not show up as
additions, unlike the reference system's diff against the raw template).
"""

from __future__ import annotations

import difflib
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import ConfigError
from clawstore.host.scratch import scratch_dir
from clawstore.runners.openclaw.config import agent_fragments

if TYPE_CHECKING:
    from clawstore.store.store import Store

STANDARD_FILES = ("AGENTS.md", "IDENTITY.md", "SOUL.md", "TOOLS.md", "USER.md")
# Bulky, regenerable directories an agent may create; pruned before the final workspace is stored.
PRUNED_DIR_NAMES = frozenset({".git", "node_modules", "__pycache__"})
PRUNED_DIR_PREFIXES = (".venv",)
DIFF_TEXT_LIMIT = 1_000_000  # bytes per file side; bigger files are reported, not diffed


def placeholder_text(filename: str) -> str:
    """Deterministic stand-in content for a standard workspace file the template lacks."""
    title = filename[:-3] if filename.endswith(".md") else filename
    return (
        f"# {title}\n\n"
        f"This {filename} was added by clawstore because the agent's workspace template has none.\n"
        "OpenClaw expects the file to exist; the agent's author left it empty on purpose or by omission.\n"
    )


def template_dir(agent_dir: Path) -> Path:
    workspace = Path(agent_dir) / "workspace"
    if not workspace.is_dir():
        raise ConfigError("agent has no workspace/ directory", str(Path(agent_dir) / "agent.yaml"), "workspace")
    return workspace


def materialize_template(agent_dir: Path, dest: Path) -> list[str]:
    """Copy the agent's workspace template into `dest` (must not exist) and add placeholders.

    Returns the names of the placeholder files written. Symlinks are copied as links; named pipes,
    sockets and devices are left out, as every tree the store keeps leaves them out.
    """
    shutil.copytree(template_dir(agent_dir), dest, symlinks=True, ignore=_special_files)
    written = []
    for name in STANDARD_FILES:
        target = dest / name
        if not target.exists() and not target.is_symlink():
            target.write_text(placeholder_text(name), encoding="utf-8")
            written.append(name)
    return written


def _special_files(directory: str, names: list[str]) -> set[str]:
    """Entries neither a file, a directory nor a link (copytree cannot copy them, put_tree skips them)."""
    kept = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)
    return {name for name in names
            if not any(is_kind(os.lstat(os.path.join(directory, name)).st_mode) for is_kind in kept)}


def placeholder_files(agent_dir: Path) -> list[str]:
    """Which standard files of this agent's workspace are placeholders (without copying anything)."""
    workspace = template_dir(agent_dir)
    return [n for n in STANDARD_FILES if not (workspace / n).exists() and not (workspace / n).is_symlink()]


def prompt_section(prompt: str) -> str:
    """The agent's `openclaw.agent.prompt` as the section appended to AGENTS.md."""
    return f"\n## Agent prompt\n\n{prompt.strip()}\n"


def add_prompt(workspace: Path, prompt: str) -> None:
    """Append the prompt to AGENTS.md: OpenClaw owns its system prompt (>= 2026.6 rejects
    `systemPromptOverride`) and injects AGENTS.md into every session, sub-agents included."""
    target = workspace / "AGENTS.md"
    if target.is_symlink():  # never write through a link: keep what it shows when that is in the template
        shown = target.resolve()
        inside = shown.is_file() and shown.is_relative_to(workspace.resolve())
        text = shown.read_text(encoding="utf-8", errors="replace") if inside else placeholder_text("AGENTS.md")
        target.unlink()
        target.write_text(text, encoding="utf-8")
    with target.open("a", encoding="utf-8") as out:
        out.write(prompt_section(prompt))


def agent_prompt(agent: Any) -> str | None:
    """`openclaw.agent.prompt` of the Agent model or its dict dump, when it is a non-blank string."""
    prompt = agent_fragments(agent)["agent"].get("prompt") if agent is not None else None
    return prompt if isinstance(prompt, str) and prompt.strip() else None


def agent_workspace_tree(store: Store, agent_dir: Path, agent: Any = None) -> str:
    """Store the agent's workspace template (placeholders and the agent's prompt included) as a
    tree; return its id."""
    with scratch_dir("claw-agent-ws-") as tmp:
        dest = Path(tmp) / "workspace"
        materialize_template(Path(agent_dir), dest)
        prompt = agent_prompt(agent)
        if prompt:
            add_prompt(dest, prompt)
        return store.put_tree(dest)


def prune_workspace(workspace: Path) -> list[str]:
    """Remove bulky regenerable directories before the final workspace is stored; return their paths."""
    pruned: list[str] = []
    for current, dirs, _files in os.walk(workspace):
        for name in sorted(dirs):
            if name in PRUNED_DIR_NAMES or name.startswith(PRUNED_DIR_PREFIXES):
                path = Path(current) / name
                pruned.append(path.relative_to(workspace).as_posix())
                if path.is_symlink():
                    path.unlink()
                else:
                    shutil.rmtree(path, ignore_errors=True)
                dirs.remove(name)
    return sorted(pruned)


def _files(store: Store, tree: str, pruned: Sequence[str] = ()) -> dict[str, Any]:
    """The tree's files and links, less those pruned from the final workspace (prune_workspace: a directory's
    entries, or a link in its place): they were not stored, which is not the agent deleting them."""
    return {e.path: e for e in store.read_tree(tree) if e.type in ("file", "symlink")
            and not any(e.path == p or e.path.startswith(f"{p}/") for p in pruned)}


def _text_lines(store: Store, entry: Any) -> list[str] | None:
    """A file's lines for diffing; None when it is binary or too big to diff."""
    if entry is None:
        return []
    if entry.type == "symlink":
        return [f"-> {entry.target}"]
    if entry.size > DIFF_TEXT_LIMIT:
        return None
    data = store.get_bytes(entry.object)
    if b"\x00" in data:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def workspace_diff(store: Store, base_tree: str, final_tree: str, pruned: Sequence[str] = ()) -> str:
    """Unified diffs (`--- template/<p>` / `+++ workspace/<p>`) of every file that differs."""
    base, final = _files(store, base_tree, pruned), _files(store, final_tree)
    chunks: list[str] = []
    for path in sorted(set(base) | set(final)):
        old, new = base.get(path), final.get(path)
        if old is not None and new is not None and (old.object, old.target, old.type) == (
                new.object, new.target, new.type):
            continue
        old_lines, new_lines = _text_lines(store, old), _text_lines(store, new)
        left = f"template/{path}" if old is not None else "/dev/null"
        right = f"workspace/{path}" if new is not None else "/dev/null"
        if old_lines is None or new_lines is None:
            chunks.append(f"Binary files {left} and {right} differ")
            continue
        chunks.append("\n".join(difflib.unified_diff(old_lines, new_lines, left, right, lineterm="")))
    return "\n".join(chunks) + ("\n" if chunks else "")


def changed_paths(store: Store, base_tree: str, final_tree: str, pruned: Sequence[str] = ()) -> dict[str, list[str]]:
    """Files added, modified and deleted by the run (relative to the workspace)."""
    base, final = _files(store, base_tree, pruned), _files(store, final_tree)
    return {
        "added": sorted(set(final) - set(base)),
        "modified": sorted(p for p in set(base) & set(final)
                           if (base[p].object, base[p].target) != (final[p].object, final[p].target)),
        "deleted": sorted(set(base) - set(final)),
    }
