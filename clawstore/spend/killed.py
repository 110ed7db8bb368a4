"""A killed build's spending, shown before any rebuild (`claw status`, `claw report`, `claw build`'s notes): what its
log says it had spent by its last write, a lower bound. docs/building.md ("A killed build's spending")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import StoreError
from clawstore.store.buildlogs import builds_dir, live_builds
from clawstore.store.documents import read_build_log_doc
from clawstore.values.costs import CostSum

if TYPE_CHECKING:
    from clawstore.store.store import Store


@dataclass(frozen=True)
class KilledBuild:
    build_id: str
    executed: int  # nodes its log counts executed or failed by its last write
    cost: CostSum  # what its log counts spent by then

    def note(self) -> str:
        # (`?` as any cost cell when nothing is known: '≥0.000000 USD' read as nothing spent; an older log's cost
        # without its counts is known)
        known = self.cost.known_usd > 0 or (self.cost.count and not self.cost.all_unknown)
        spent = f"≥{self.cost.known_usd:.6f} USD" if known else "an unknown amount"
        return (f"build {self.build_id} of this campaign was killed before it finished: by its log's last write it "
                f"had executed {self.executed} node(s) and spent {spent}{self.cost.notes()}; what it paid for after "
                "that write and for its requests in flight is not counted (what it finished is reused by the next "
                "claw build)")


def journals(store_root: Path) -> list[Path]:
    """The build logs' journals, what a running or killed build leaves (none: no build was killed, and no Store need
    be opened to say so)."""
    directory = builds_dir(store_root)
    return sorted(directory.glob("*.jsonl")) if directory.is_dir() else []


def killed_builds(store: Store, campaign_id: str) -> list[KilledBuild]:
    """The builds of `campaign_id` killed since its head last moved (all, when it has none): a log still `running`
    with its journal beside it (a build seals both at its end) and no live lease. A damaged log is passed over."""
    found_journals = journals(store.root)
    if not found_journals:
        return []
    moved = _head_moved(store, campaign_id)
    live = live_builds(store)
    found = []
    for journal in found_journals:
        build_id = journal.stem
        # (its id says its start to the second: one started in the second the head moved is told by its log's start)
        if build_id in live or (moved is not None and _started(build_id) + 1 <= moved):
            continue
        path = journal.with_suffix(".json")
        try:
            doc = read_build_log_doc(json.loads(path.read_bytes()), str(path))
        except (OSError, ValueError, StoreError):
            continue
        if doc.state != "running" or doc.campaign_id != campaign_id:
            continue
        if moved is not None and _started_at(doc.started_at, build_id) <= moved:
            continue
        found.append(KilledBuild(build_id, int(doc.counts.get("executed") or 0) + int(doc.counts.get("failed") or 0),
                                 CostSum.of_build(doc.metrics)))
    return found


def killed_note(store: Store, campaign_id: str) -> str | None:
    notes = [build.note() + _containers_note(store, build.build_id) for build in killed_builds(store, campaign_id)]
    return "; ".join(notes) if notes else None


def _containers_note(store: Store, build_id: str) -> str:
    """A killed build's agents outlive it (runners/openclaw/orphans.py): said while its record of them is there."""
    from clawstore.runners.openclaw.orphans import RECORDS

    if not any((store.root / RECORDS).glob(f"{build_id}.*.json")):
        return ""
    return (". And it started OpenClaw containers, which run on until `claw gc` or the next claw build stops them: "
            "an agent still running calls its provider")


def _head_moved(store: Store, campaign_id: str) -> float | None:
    """When the campaign's head ref was last written (None: it has no head)."""
    from clawstore.builder.buildlog import head_ref

    try:
        return (store.layout.refs / head_ref(campaign_id)).stat().st_mtime
    except OSError:
        return None


def _started(build_id: str) -> float:
    """A build id's start (`20261205T021720-6f1144c7`: to the second, UTC; an id of another form: now)."""
    try:
        return datetime.strptime(build_id[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return datetime.now(UTC).timestamp()


def _started_at(started_at: str, build_id: str) -> float:
    """A build log's `started_at` (`2026-12-05T02:17:20.123456Z`); when that is unreadable, the latest its id allows
    (shown rather than passed over: it may have spent money)."""
    try:
        return datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return _started(build_id) + 1
