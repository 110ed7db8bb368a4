"""`claw batch status` / `cancel`: collect a campaign's finished batch lines outside a build; cancel batches.

Collecting plans the campaign as `claw status` does (no run executes) and records every finished line
of the batches covering its judgements, as a build would (eval_batch.py); the records land in the
action cache, and the next build reuses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawstore.builder import batch_doc
from clawstore.builder.api import _LazyClient, _plan_all, _provider_client
from clawstore.builder.batch_doc import BatchDoc
from clawstore.builder.batching import forget_recorded
from clawstore.builder.buildlog import BuildLog
from clawstore.builder.cyclic_gc import collector_paused
from clawstore.builder.session import BuildOptions, BuildSession
from clawstore.host.machine_settings import backoff_base
from clawstore.store.claims import ClaimBoard
from clawstore.values.costs import CostSum

if TYPE_CHECKING:
    from clawstore.config.campaign import Campaign
    from clawstore.store.store import Store


@dataclass
class Collected:
    campaign_id: str
    recorded: int
    batches: list[BatchDoc]
    stopped: str | None = None  # the endpoints that answered a final 402 (out of credit), as a build's summary says
    spent: CostSum = CostSum()  # what the lines recorded now cost (the next build reuses them: its spend is 0)


def collect(campaign: Campaign, store: Store, wait: bool = False, poll_s: float | None = None) -> Collected:
    """Record every finished line of the batches covering this campaign's judgements (with `wait`,
    until none is pending); the batches still in the store after that."""
    from clawstore.builder.eval_batch import batch_judges
    from clawstore.builder.eval_layer import EvalLayer
    from clawstore.builder.run_batch import batch_runs

    with collector_paused():
        if not forget_recorded(store):  # (`claw status` asks every time: nothing to poll is the usual case)
            return Collected(campaign.campaign_id, 0, [])
        store.adopt_orphans()
        # A session of its own: its log is never written (what it records lands in the action cache).
        log = BuildLog(store, {"id": campaign.campaign_id})
        options = BuildOptions(batch=False, wait=wait, batch_poll_s=poll_s)  # collect only: nothing is submitted
        # The build's client and refusals: a final 402 (a batch line's, a re-creation's) stops every request there
        backoff = backoff_base()
        client = _LazyClient(lambda: _provider_client(backoff))
        session = BuildSession(store, log, options, ClaimBoard(store.root, owner=log.build_id),
                               refusals=client.refusals)
        try:
            with store.lease(f"batch collect {log.build_id}"), session.claims:
                nodes, pending, head = _plan_all(campaign, store)
                runs = [n for n in nodes if n.kind == "run" and not n.fresh]
                if runs:
                    batch_runs(session, runs, client)
                judges = [n for n in nodes if n.kind == "judge" and n.key not in pending and not n.fresh]
                if judges:
                    layer = EvalLayer(campaign, store, client, head)
                    batch_judges(layer, session, judges, [])
        finally:
            client.close()
        return Collected(campaign.campaign_id, log.counts["executed"] + log.counts["failed"], batch_doc.pending(store),
                         client.refusals.message(), CostSum.of_build(log.metrics))

