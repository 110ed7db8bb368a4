"""`claw validate [ROOT]`: load every config of a workspace and print every problem, one per line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawstore.errors import UsageError

if TYPE_CHECKING:
    from clawstore.config.catalog import Workspace


def _display_path(issue_path: str, strip_configs: bool) -> str:
    # When ROOT is the configs/ dir itself, show paths relative to it, as promised.
    if strip_configs and issue_path.startswith("configs/"):
        return issue_path[len("configs/"):]
    return issue_path


_NOUNS = [("cases", "case"), ("suites", "suite"), ("run_profiles", "run profile"),
          ("evaluation_profiles", "evaluation profile"), ("agents", "agent")]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@click.command()
@click.argument("root", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def validate(root: Path | None, as_json: bool) -> None:
    """Validate every config under ROOT (a workspace dir containing configs/, or configs/ itself).

    Exit 0 when everything is valid, 2 otherwise.
    """
    from clawstore.config import load_workspace
    from clawstore.config.references import find_workspace_root, split_root

    if root is None:
        root = find_workspace_root(Path.cwd())
    elif not root.is_dir():
        raise UsageError(f"{root}: no such directory")
    elif split_root(root.absolute()) is None:
        raise UsageError(f"{root} is not a workspace: it has no configs/ directory (and is not one)")
    strip_configs = root.absolute().name == "configs" and not (root / "configs").is_dir()
    workspace = load_workspace(root)
    issues = sorted(workspace.issues, key=lambda i: i.path)  # stable: files in path order
    warnings = sorted(workspace.warnings, key=lambda i: i.path)
    counts = workspace.counts()
    if as_json:
        errors = [dict(i.as_dict(), path=_display_path(i.path, strip_configs)) for i in issues]
        said = [dict(w.as_dict(), path=_display_path(w.path, strip_configs)) for w in warnings]
        click.echo(json.dumps({"ok": not issues, "errors": errors, "warnings": said, "counts": counts}, indent=2))
    else:
        for warning in warnings:  # (on stderr, as a build says them: stdout stays the list of errors)
            parts = [_display_path(warning.path, strip_configs), warning.field, warning.message]
            click.echo("warning: " + ": ".join(p for p in parts if p), err=True)
        for issue in issues:
            parts = [_display_path(issue.path, strip_configs), issue.field, issue.message]
            click.echo(": ".join(p for p in parts if p))
        if issues:  # a config loaded whole but named by an error (one it makes with another file's) is not valid
            counts = _valid_counts(workspace, {issue.file for issue in issues})
        summary = ", ".join(_plural(counts[key], noun) for key, noun in _NOUNS)
        if issues:
            files = len({i.path for i in issues})
            click.echo(f"{_plural(len(issues), 'error')} in {_plural(files, 'file')} (valid: {summary})")
        else:
            click.echo(f"OK: {summary}")
    if issues:
        sys.exit(2)


def _valid_counts(workspace: Workspace, erring: set[Path | None]) -> dict[str, int]:
    """The configs of each kind whose file no error names (before session 75 one whose only error was with another
    file, a suite naming a case that does not exist, was counted as valid)."""
    return {key: sum(1 for loaded in getattr(workspace, key).values() if loaded.path not in erring)
            for key, _ in _NOUNS}


def register(group: click.Group) -> None:
    group.add_command(validate)
