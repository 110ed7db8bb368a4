"""The campaign a command's flags name, as IDs, without loading the whole workspace.

Commands that read only the store (`claw report`) must work after the configs changed or broke, so
they resolve names with the same rule as `claw build` (path, file stem, ID: `references.locate_file`)
but read only the one file a path or stem points at, and only for its id field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clawstore.config.references import locate_file
from clawstore.config.yamlio import YamlProblem, load_mapping
from clawstore.errors import ConfigError, UsageError

ID_FIELDS = {"suite": "suite_id", "run profile": "run_profile_id", "evaluation profile": "evaluation_profile_id"}


@dataclass(frozen=True)
class CampaignIds:
    suite_id: str
    run_profile_id: str
    evaluation_profile_id: str | None

    @property
    def campaign_id(self) -> str:
        return f"{self.suite_id}__{self.run_profile_id}__{self.evaluation_profile_id or 'none'}"


def _id_field(path: Path, kind: str) -> str:
    field = ID_FIELDS[kind]
    try:  # the guards of every config read: size, nesting, duplicate keys, UTF-8
        data = load_mapping(path)
    except YamlProblem as exc:
        raise ConfigError(str(exc), str(path)) from None
    found = data.get(field)
    if not isinstance(found, str) or not found:
        raise ConfigError("missing or not a string", str(path), field)
    return found


def _workspace_root(cwd: Path) -> Path | None:
    from clawstore.config.references import find_workspace_root

    try:
        return find_workspace_root(cwd)
    except UsageError:
        return None


def named_id(kind: str, value: str, cwd: Path, root: Path | None) -> str:
    """The ID a flag value names: the id field of the file it points at (path or stem), else the value."""
    path = locate_file(kind, value, root, cwd)
    return value if path is None else _id_field(path, kind)


def campaign_ids(cwd: Path, suite: str, run_profile: str, evaluation_profile: str | None) -> CampaignIds:
    root = _workspace_root(cwd)
    return CampaignIds(
        suite_id=named_id("suite", suite, cwd, root),
        run_profile_id=named_id("run profile", run_profile, cwd, root),
        evaluation_profile_id=(named_id("evaluation profile", evaluation_profile, cwd, root)
                               if evaluation_profile else None),
    )
