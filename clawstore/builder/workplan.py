"""What a build would execute, node by node and layer by layer, without executing anything.

`inspect` plans every node whose inputs are already stored; a node whose inputs do not exist yet
(the judges of a run never built, the checks of a run that will run) is only known by its address.
`work_items` lists both, so `claw plan`, `claw build --dry-run` and `claw status` count the same work.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from clawstore.graph.plan import Node

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
    item: Any = None  # the campaign item (model × case) the node belongs to
    judge: Any = None  # JudgeConfig, for judge work


def _run_key(address: dict[str, Any]) -> tuple[str, str, int]:
    return (address["model_id"], address["case_id"], address["repetition"])


def work_items(campaign: Any, states: list[Any], force: bool = False) -> list[Work]:
    """Every node of the campaign (from `inspect`'s states), with the not-yet-keyed ones expanded."""
    items: list[Work] = []
    by_run: dict[tuple[str, str, int], dict[str, list[Any]]] = {}
    runs: list[Any] = []
    for s in states:
        if s.node.kind == "run":
            runs.append(s)
        by_run.setdefault(_run_key(s.node.address), {}).setdefault(s.node.kind, []).append(s)
    profile = campaign.evaluation_profile
    judge_plan = ([(jr, rep) for jr in profile.judge_runs for rep in range(jr.repetitions)]
                  if profile is not None else [])
    for run in runs:
        address = run.node.address
        item = run.node.item
        run_executes = force or run.state != "fresh"
        items.append(Work("run", address, run_executes, True, run.node, item))
        if profile is None:
            continue
        layers = by_run.get(_run_key(address), {})
        for kind in ("checks", "judge", "result"):
            known = [s for s in layers.get(kind, []) if not s.node.key.startswith("pending:")]
            for s in known:
                judge = _judge_of(profile, s.node.address["judge_run_id"]) if kind == "judge" else None
                items.append(Work(kind, s.node.address, force or s.state != "fresh", True, s.node, item, judge))
            if known:
                continue
            if kind == "judge":
                for judge_run, rep in judge_plan:
                    judge_address = {**address, "judge_run_id": judge_run.judge_run_id, "judge_repetition": rep}
                    items.append(Work("judge", judge_address, True, run_executes, None, item,
                                      profile.judge(judge_run.judge_id)))
            else:
                items.append(Work(kind, dict(address), True, run_executes, None, item))
    return items


def _judge_of(profile: Any, judge_run_id: str) -> Any:
    run = next(jr for jr in profile.judge_runs if jr.judge_run_id == judge_run_id)
    return profile.judge(run.judge_id)


def layer_counts(items: list[Work]) -> dict[str, dict[str, int]]:
    """Per layer: how many nodes execute, how many are reused, how many are not keyed yet."""
    counts: dict[str, Counter[str]] = {kind: Counter() for kind in LAYERS}
    for work in items:
        counts[work.kind]["execute" if work.executes else "reuse"] += 1
        if not work.exact:
            counts[work.kind]["unplanned"] += 1
    return {kind: {name: c[name] for name in ("execute", "reuse", "unplanned")} for kind, c in counts.items()
            if sum(c.values())}
