"""A killed build's spending (`claw status`, `claw report`, `claw build`'s notes): what its log says it had spent by
its last write, a lower bound. Named until a build that found it killed at its start has ended and named it too (its
log then says so: `told_by`). docs/building.md ("A killed build's spending")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError
from clawstore.store.buildlogs import TOLD_BY, set_build_log_field, untold_killed
from clawstore.store.documents import BuildLogDoc, read_build_log_doc
from clawstore.values.costs import CostSum, shown_usd, usd

if TYPE_CHECKING:
    from clawstore.store.store import Store


@dataclass(frozen=True)
class KilledBuild:
    build_id: str
    executed: int  # nodes its log counts executed or failed by its last write
    cost: CostSum  # what its log counts spent by then

    @property
    def known_usd(self) -> float | None:
        """What its log says it spent at least; None when nothing of it is known (`?` as any cost cell: '≥0.000000
        USD' read as nothing spent; an older log's cost without its counts is known)."""
        known = self.cost.known_usd > 0 or (self.cost.count and not self.cost.all_unknown)
        return self.cost.known_usd if known else None

    def to_json(self) -> dict[str, Any]:
        """As `--output json` carries it (`claw report`, `claw status`, `claw build`): its total never known (what it
        paid after its log's last write is not counted), so `cost_usd` is null and `known_cost_usd` a lower bound,
        null when nothing of it is known (never 0)."""
        return {"build_id": self.build_id, "nodes": self.executed, "cost_usd": None,
                "known_cost_usd": shown_usd(self.known_usd), "cost_sources": self.cost.sources()}

    def note(self) -> str:
        spent = "an unknown amount" if self.known_usd is None else f"≥{usd(self.cost.known_usd, 6)} USD"
        return (f"build {self.build_id} of this campaign was killed before it finished: by its log's last write it "
                f"had executed {self.executed} node(s) and spent {spent}{self.cost.notes()}; what it paid for after "
                "that write and for its requests in flight is not counted (what it finished is reused by the next "
                "claw build)")


def killed_builds(store: Store, campaign_id: str) -> list[KilledBuild]:
    """The builds of `campaign_id` killed and not yet told of by a later build: a log still `running` with its journal
    beside it (a build seals both at its end), no live lease, and no `told_by` (`tell`; store/buildlogs.py
    untold_killed). A damaged log is passed over."""
    found = []
    for journal, data in untold_killed(store):
        logged = None if data is None else _from_log(journal, data)
        if logged is not None and logged[1].campaign_id == campaign_id:
            found.append(logged[0])
    return found


def as_logged(journal: Path) -> KilledBuild | None:
    """What a build's summary says of it, were it killed now: the counts and cost of its log's document beside
    `journal` as last written (None: no readable document yet). The document is rewritten after each journal append,
    so the journal may hold a write's nodes more than it counts (a build killed between the two: `nodes` 0 beside a
    journal line); what it counts is durable (spend/killed.py counts nothing else)."""
    logged = _logged(journal)
    return None if logged is None else logged[0]


def _logged(journal: Path) -> tuple[KilledBuild, BuildLogDoc, dict[str, Any]] | None:
    try:
        data = json.loads(journal.with_suffix(".json").read_bytes())
    except (OSError, ValueError):
        return None
    return _from_log(journal, data)


def _from_log(journal: Path, data: Any) -> tuple[KilledBuild, BuildLogDoc, dict[str, Any]] | None:
    try:
        doc = read_build_log_doc(data, str(journal.with_suffix(".json")))
    except (ValueError, StoreError):
        return None
    executed = int(doc.counts.get("executed") or 0) + int(doc.counts.get("failed") or 0)
    return KilledBuild(journal.stem, executed, CostSum.of_build(doc.metrics)), doc, data


def tell(store: Store, killed: list[KilledBuild], by: str) -> None:
    """Build `by`, which found `killed` killed at its start and named them at its end: their logs say so, and they are
    named no more (a log that cannot be written is named again: a note too many, never one too few)."""
    for build in killed:
        try:
            set_build_log_field(store.root, build.build_id, TOLD_BY, by)
        except (OSError, ValueError):
            continue


def killed_notes(store: Store, killed: list[KilledBuild]) -> list[str]:
    return [build.note() + _containers_note(store, build.build_id) for build in killed]


def killed_note(store: Store, campaign_id: str) -> str | None:
    notes = killed_notes(store, killed_builds(store, campaign_id))
    return "; ".join(notes) if notes else None


def _containers_note(store: Store, build_id: str) -> str:
    """A killed build's agents outlive it (runners/openclaw/orphans.py): said while its record of them is there, which
    its watchdog removes with them (runners/openclaw/watchdog.py; a watchdog killed too, or an engine that did not
    answer it, leaves it)."""
    from clawstore.runners.openclaw.orphans import RECORDS

    if not any((store.root / RECORDS).glob(f"{build_id}.*.json")):
        return ""
    return (". And it started OpenClaw containers, which its watchdog has not stopped (yet): they may run on until "
            "`claw gc` or the next claw build stops them, and an agent still running calls its provider")
