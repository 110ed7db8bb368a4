"""`claw batch status` / `cancel`: collect a campaign's finished batch lines outside a build; cancel batches.

Collecting plans the campaign as `claw status` does (no run executes) and records every finished line
of the batches covering its judgements, as a build would (eval_batch.py); the records land in the
action cache, and the next build reuses them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawstore.builder import batch_doc
from clawstore.builder.api import _llm_probe_spec, _plan_all, _provider_client
from clawstore.builder.batch_doc import BatchDoc
from clawstore.builder.batching import forget_recorded
from clawstore.builder.buildlog import new_build_id
from clawstore.builder.gcpause import collector_paused
from clawstore.machine_settings import backoff_base
from clawstore.store.claims import ClaimBoard

if TYPE_CHECKING:
    from clawstore.store.store import Store


@dataclass
class _CollectLog:
    """What eval_batch needs of a build log: an id for the claims, and counts of what was recorded."""

    build_id: str
    claims: ClaimBoard | None = None
    counts: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, key: str, record_id: str | None, action: str, address: dict[str, Any],
            record: dict[str, Any] | None) -> None:
        with self._lock:
            self.counts[action] = self.counts.get(action, 0) + 1


@dataclass(frozen=True)
class _Options:
    force: bool = False
    batch: bool = False  # collect only: nothing new is submitted
    wait: bool = False
    batch_poll_s: float | None = None


@dataclass
class Collected:
    campaign_id: str
    recorded: int
    batches: list[BatchDoc]


def collect(campaign: Any, store: Store, wait: bool = False, poll_s: float | None = None) -> Collected:
    """Record every finished line of the batches covering this campaign's judgements (with `wait`,
    until none is pending); the batches still in the store after that."""
    from clawstore.builder.eval_batch import batch_judges
    from clawstore.builder.eval_layer import EvalLayer
    from clawstore.builder.progress import QuietProgress
    from clawstore.builder.run_batch import batch_runs

    with collector_paused():
        if not forget_recorded(store):  # (`claw status` asks every time: nothing to poll is the usual case)
            return Collected(campaign.campaign_id, 0, [])
        store.adopt_orphans()
        log = _CollectLog(new_build_id())
        client = _provider_client(backoff_base())
        try:
            with store.lease(f"batch collect {log.build_id}"), ClaimBoard(store.root, owner=log.build_id) as board:
                log.claims = board
                options = _Options(wait=wait, batch_poll_s=poll_s)
                nodes, pending, head = _plan_all(campaign, store)
                runs = [n for n in nodes if n.kind == "run" and not n.fresh]
                if runs:
                    batch_runs(store, campaign.campaign_id, runs, log, options, None, QuietProgress(), client,
                               lambda node: _llm_probe_spec(node.item, node.extra["endpoint"]))
                judges = [n for n in nodes if n.kind == "judge" and n.key not in pending and not n.fresh]
                if judges:
                    layer = EvalLayer(campaign, store, client, head)
                    batch_judges(layer, judges, log, options, [])
        finally:
            client.close()
        return Collected(campaign.campaign_id, log.counts.get("exec", 0) + log.counts.get("fail", 0),
                         batch_doc.pending(store))

