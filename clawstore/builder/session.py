"""One build's shared state, handed to each layer instead of a long list of parameters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from math import fsum
from typing import TYPE_CHECKING, Any

from clawstore.builder.progress import BuildProgress, QuietProgress
from clawstore.values.costs import CostSum, usd

if TYPE_CHECKING:
    from clawstore.builder.buildlog import BuildLog
    from clawstore.builder.lanes import Lanes
    from clawstore.builder.refused import Refusals
    from clawstore.builder.unstored import StoreTrouble
    from clawstore.graph.plan import Node
    from clawstore.store.claims import ClaimBoard
    from clawstore.store.store import Store


class Budget:
    """`--max-cost`: once the build has spent the limit (reported and priced cost), nodes that call a provider are not
    started; running ones finish and are kept, so spend may pass the limit by what was in flight. Details:
    docs/building.md (Details by module)."""

    def __init__(self, limit_usd: float, metrics: Callable[[], dict[str, Any]]):
        self.limit_usd = limit_usd
        self.metrics = metrics
        self.reason: str | None = None
        # Batch lines this build submitted and has not collected: node key -> their estimated cost. Counted
        # when submitted, settled (replaced by the record's cost) when collected (builder/eval_batch.py).
        self.committed: dict[str, float] = {}
        # The first node whose cost is unknown, and why (`unknown_cost_of`): the stop names it.
        self.unknown_first: str | None = None

    @property
    def spent(self) -> float:
        return float(self.metrics()["cost_usd"]) + sum(self.committed.values())

    def reached(self) -> bool:
        return self.spent >= self.limit_usd or self.unknown()

    def unknown(self) -> bool:
        """Has a cost this build spent become unknown (a reply never read whole, a usage not believed)? The plan was
        known, but that request may have cost any amount: the limit can no longer be kept, so nothing more starts.
        (Counted as 0, a build whose every answer was cut once spent `?` USD past any limit.)"""
        return bool(self.metrics().get("cost_unknown"))

    def room_for(self, estimate: float | None) -> bool:
        """May a batch line of this estimated cost still be submitted (an unknown one may not)?"""
        return estimate is not None and self.spent + estimate <= self.limit_usd and not self.unknown()

    def note_skips(self, not_done: str = "started") -> None:
        """Say why the rest was not started (or, batch lines, not submitted): the same words on either path."""
        spent, pending = CostSum.of_build(self.metrics()), fsum(self.committed.values())
        batches = f" and {usd(pending, 6)} USD estimated for batch lines not collected yet" if pending else ""
        why = "reached" if not spent.unknown else "cannot be kept: a cost spent is unknown"
        # (before session 78 the unknown one went unnamed: which run, and why, was for the user to find)
        first = f"; the first unknown: {self.unknown_first}" if spent.unknown and self.unknown_first else ""
        self.reason = (f"--max-cost {self.limit_usd:g} USD {why} (spent {spent.usd_text()}{batches}); "
                       f"the rest was not {not_done}: nothing was sent for it{first}")


def unknown_cost_of(node: Node, model: object) -> str:
    """The first node whose cost is unknown, for the stop: its address, its model (`model`: read from its document
    before the record released it), and why (its failure, e.g. `http_error: HTTP 404 from <endpoint>: <message>`)."""
    from clawstore.builder.progress import failure_reason
    from clawstore.graph.plan import address_id

    named = f" (model {model})" if isinstance(model, str) and model else ""
    status = (node.record or {}).get("status")
    why = failure_reason(node) if node.action == "fail" else f"{status or 'answered'}, no cost reported or priced"
    return f"{address_id(node.kind, node.address)}{named}, {why}"


def requested_model(node: Node) -> object:
    """The model a node's document asks (a run's; None for nodes whose document names none, or released)."""
    document = node.document if isinstance(node.document, dict) else {}
    model = document.get("model")
    return model.get("requested_model") if isinstance(model, dict) else None


@dataclass
class BuildOptions:
    """How `claw build` was asked to build (its flags)."""

    dry_run: bool = False
    force: bool = False
    max_concurrency: int | None = None
    fixed_concurrency: bool = False  # --fixed-concurrency: max_concurrency in flight, not as many as help (inflight.py)
    quiet: bool = False
    filtered: bool = False  # --case/--model given: keep the rest of the campaign head as it was
    max_cost_usd: float | None = None  # --max-cost: no new provider-calling node once this much is spent
    progress: str = "auto"  # auto | live | plain | json | none (clawstore/builder/progress.py)
    planned_cost_usd: float | None = None  # the plan's estimate, shown next to what is spent
    planned_cost_minimum: bool = False  # it is a floor (an agent never run: spend/estimate.py Estimate.floor)
    # The plan's nodes by layer (SpendPlan.layers: kind -> execute, reuse, unplanned): the live display counts those of
    # the layers not begun yet in its total and ETA. None: no plan made (the other displays make none).
    planned_layers: Mapping[str, Mapping[str, int]] | None = None
    executor: str = "local"  # local | ray: where provider requests run (clawstore/builder/ray_client.py)
    ray_address: str | None = None
    filter: dict[str, list[str]] | None = None  # the --case/--model selection, by id, for the build log
    batch: bool = False  # --batch: judgements go to the provider's Batch API (builder/eval_batch.py)
    wait: bool = False  # --wait: with --batch, poll until every batch is collected
    batch_poll_s: float | None = None  # seconds between polls (default builder/batching.py)
    say: Callable[[str], None] | None = None  # where the build's warnings go (the command's stderr); None: nowhere


@dataclass
class BuildSession:
    """What every layer of one build shares: where it records (store, log), the work claims it holds,
    how it shows progress, what it may spend, the store's write failures, its slots and rate limits.
    (`claw batch status` collects batch lines in a session of its own: builder/batch_collect.py.)"""

    store: Store
    log: BuildLog
    options: BuildOptions
    claims: ClaimBoard
    concurrency: int = 1
    progress: BuildProgress = field(default_factory=QuietProgress)
    budget: Budget | None = None
    trouble: StoreTrouble | None = None
    lanes: Lanes | None = None
    refusals: Refusals | None = None  # endpoints out of credit (builder/refused.py): a provider batch is not sent there

    @property
    def build_id(self) -> str:
        return self.log.build_id

    @property
    def campaign_id(self) -> str:
        return str(self.log.doc.campaign["id"])
