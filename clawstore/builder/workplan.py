"""What a build would execute, node by node and layer by layer, without executing anything.

`inspect` plans every node whose inputs are already stored; a node whose inputs do not exist yet
(the judges of a run never built, the checks of a run that will run) is a `pending:` placeholder
known by its address. `work_items` adds what `claw plan` prices: the judge of each judgement and
whether a placeholder's execution is certain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawstore.graph.plan import Node

if TYPE_CHECKING:
    from clawstore.builder.api import NodeState
    from clawstore.config.campaign import Campaign, CampaignItem
    from clawstore.config.models import EvaluationProfile, JudgeConfig

LAYERS = ("run", "checks", "judge", "result")
# Layers whose nodes call a provider (the others compute locally and cost nothing).
PAID_LAYERS = frozenset({"run", "judge"})


@dataclass(frozen=True)
class Work:
    """One node the campaign plans. A node not keyed yet (its inputs are built by this same build)
    executes; that is certain when its run executes (a new run's output is new, so are its judge
    keys) and only the safe guess otherwise (`exact` False: new checks may equal stored ones)."""

    kind: str
    address: dict[str, Any]
    executes: bool
    exact: bool
    node: Node | None = None
    item: CampaignItem | None = None  # the campaign item (model × case) the node belongs to
    judge: JudgeConfig | None = None  # for judge work


def _run_key(address: dict[str, Any]) -> tuple[str, str, int]:
    return (address["model_id"], address["case_id"], address["repetition"])


def work_items(campaign: Campaign, states: list[NodeState], force: bool = False) -> list[Work]:
    """Every node of the campaign from `inspect`'s states (which hold a `pending:` placeholder for each
    node not keyed yet), with the judge config of each judgement and whether its count is certain."""
    profile = campaign.evaluation_profile
    runs = {_run_key(s.node.address): s for s in states if s.node.kind == "run"}
    items: list[Work] = []
    for s in states:
        run = runs[_run_key(s.node.address)]
        run_executes = force or run.state != "fresh"
        pending = s.node.key.startswith("pending:")
        judge = _judge_of(profile, s.node.address["judge_run_id"]) if s.node.kind == "judge" else None
        items.append(Work(s.node.kind, s.node.address, pending or force or s.state != "fresh",
                          not pending or run_executes, None if pending else s.node, run.node.item, judge))
    return items


def _judge_of(profile: EvaluationProfile | None, judge_run_id: str) -> JudgeConfig:
    assert profile is not None, "judge work comes of an evaluation profile"
    run = next(jr for jr in profile.judge_runs if jr.judge_run_id == judge_run_id)
    return profile.judge(run.judge_id)


class LayerCounts:
    """Per layer: how many nodes execute, how many are reused, how many are not keyed yet (`add` each node's work)."""

    def __init__(self) -> None:
        self._counts: dict[str, Counter[str]] = {kind: Counter() for kind in LAYERS}

    def add(self, work: Work) -> None:
        self._counts[work.kind]["execute" if work.executes else "reuse"] += 1
        if not work.exact:
            self._counts[work.kind]["unplanned"] += 1

    def layers(self) -> dict[str, dict[str, int]]:
        return {kind: {name: c[name] for name in ("execute", "reuse", "unplanned")}
                for kind, c in self._counts.items() if sum(c.values())}
