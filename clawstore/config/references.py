"""Finding the workspace and turning `--suite/--run-profile/--evaluation-profile` values into files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from clawstore.errors import UsageError

KIND_DIRS = {
    "suite": "suites",
    "run profile": "run_profiles",
    "evaluation profile": "evaluation_profiles",
}


def split_root(path: Path) -> tuple[Path, Path] | None:
    """(workspace root, configs dir) when `path` is a workspace root or its `configs/` dir itself."""
    if (path / "configs").is_dir():
        return path, path / "configs"
    if path.name == "configs" and path.is_dir():
        return path.parent, path
    return None


def find_workspace_root(start: Path) -> Path:
    """The nearest directory, from `start` upwards, that contains `configs/`."""
    start = Path(start).absolute()
    if start.is_file():
        start = start.parent
    for candidate in (start, *start.parents):
        found = split_root(candidate)
        if found:
            return found[0]
    raise UsageError(no_workspace_message(start))


def no_workspace_message(start: Path, store: Path | None = None) -> str:
    """The one message of every command run outside a workspace: what claw looked for, and where.
    `store`: where it looked for the store (default store/ in `start`)."""
    store = store or start / "store"
    found = "found the store but no configs/" if store.is_dir() else "found neither"
    return (f"no workspace found: claw looks for a configs/ directory in {start} and every directory above it, "
            f"and for its store at {store} ({found}); run claw in a workspace (a checkout, or any directory "
            "holding configs/), or name an existing store with --store DIR or $CLAW_STORE")


def looks_like_path(value: str) -> bool:
    """A flag value is a path when it has a separator, starts with '.', or ends in .yaml/.yml."""
    lowered = value.lower()
    return "/" in value or "\\" in value or value.startswith(".") or lowered.endswith((".yaml", ".yml"))


def locate_file(kind: str, value: str, root: Path | None, cwd: Path) -> Path | None:
    """The file a flag value names by path (relative to cwd) or by file stem under configs/<kind>/.

    None when the value is neither: it is then an ID, matched against the `<kind>_id` fields.
    """
    if looks_like_path(value):
        path = Path(os.path.expanduser(value))
        path = path if path.is_absolute() else cwd / path
        if not path.is_file():
            raise UsageError(f"{kind} file not found: {value}")
        return path.absolute()
    if root is None:
        return None
    directory = root / "configs" / KIND_DIRS[kind]
    hits = [p for p in (directory / f"{value}.yaml", directory / f"{value}.yml") if p.is_file()]
    if len(hits) == 2:
        raise UsageError(f"ambiguous {kind} '{value}': both {hits[0].name} and {hits[1].name} exist; "
                         "pass an explicit path")
    return hits[0].absolute() if hits else None


def resolve_reference(kind: str, value: str, root: Path, cwd: Path, by_id: Mapping[str, Path]) -> Path:
    """The YAML file a flag value names: the one naming rule of every command (see docs/building.md).

    In order: an explicit path (relative to cwd); a file stem `configs/<dir>/<value>.yaml|.yml`; an ID,
    matched against the id field of the loaded files (so a file named differently from its id resolves).
    """
    located = locate_file(kind, value, root, cwd)
    if located is not None:
        return located
    if value in by_id:
        return by_id[value]
    available = ", ".join(sorted(by_id)) or "none"
    raise UsageError(f"could not resolve {kind} '{value}' under configs/{KIND_DIRS[kind]} "
                     f"(available: {available}); pass an ID or a path to a YAML file")
