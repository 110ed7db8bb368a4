"""What the campaign flags of a command name: its own small module, so a command answered from its stamp (a no-op
build, status, a dry run) does not import the builder (builder/api.py and the engine: ~50 ms of its start)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CampaignRequest:
    """What the campaign flags name (IDs or paths), relative to `cwd`."""

    cwd: Path
    suite: str
    run_profile: str
    evaluation_profile: str | None = None
    cases: tuple[str, ...] = ()
    models: tuple[str, ...] = ()

    @property
    def filtered(self) -> bool:
        return bool(self.cases or self.models)
