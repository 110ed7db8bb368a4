"""Which campaign a report is about: IDs from the flags, never a full config load.

A report must work after the configs changed or broke, so a flag given as a path is read only for
its ID field; a plain ID is used as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from clawstore.errors import ConfigError

_ID_FIELDS = {"suite": "suite_id", "run_profile": "run_profile_id", "evaluation_profile": "evaluation_profile_id"}


@dataclass(frozen=True)
class CampaignIds:
    suite_id: str
    run_profile_id: str
    evaluation_profile_id: str | None

    @property
    def campaign_id(self) -> str:
        return f"{self.suite_id}__{self.run_profile_id}__{self.evaluation_profile_id or 'none'}"


def _looks_like_path(value: str) -> bool:
    return value.endswith((".yaml", ".yml")) or "/" in value or "\\" in value


def id_from_flag(value: str, kind: str) -> str:
    """`value` is an ID or a path to the YAML whose `<kind>_id` field holds it."""
    if not _looks_like_path(value):
        return value
    field = _ID_FIELDS[kind]
    path = Path(value)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("file not found", str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read ({exc})", str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"invalid YAML{where}", str(path)) from None
    found = data.get(field) if isinstance(data, dict) else None
    if not isinstance(found, str) or not found:
        raise ConfigError("missing or not a string", str(path), field)
    return found


def campaign_ids(suite: str, run_profile: str, evaluation_profile: str | None) -> CampaignIds:
    return CampaignIds(
        suite_id=id_from_flag(suite, "suite"),
        run_profile_id=id_from_flag(run_profile, "run_profile"),
        evaluation_profile_id=id_from_flag(evaluation_profile, "evaluation_profile") if evaluation_profile else None,
    )
