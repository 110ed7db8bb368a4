"""`claw batch status` / `cancel`: collect a campaign's finished batch lines outside a build; cancel batches.

Collecting plans the campaign as `claw status` does (no run executes) and records every finished line
of the batches covering its judgements, as a build would (eval_batch.py); the records land in the
action cache, and the next build reuses them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawstore.builder import batch_doc
from clawstore.builder.batch_doc import BatchDoc
from clawstore.builder.cyclic_gc import collector_paused
from clawstore.store import RefConflict
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
    if not store.list_refs(batch_doc.REF_PREFIX):  # (`claw status` asks every time: no batch is the usual case)
        return Collected(campaign.campaign_id, 0, [])
    # (here: a status of a store without batches never imports the batch API and httpx, ~100 ms of its start)
    from clawstore.builder.api import _LazyClient, _plan_all, _provider_client
    from clawstore.builder.batching import forget_recorded
    from clawstore.builder.buildlog import BuildLog
    from clawstore.builder.eval_batch import batch_judges
    from clawstore.builder.eval_layer import EvalLayer
    from clawstore.builder.refused import COLLECTING, Refusals
    from clawstore.builder.run_batch import batch_runs
    from clawstore.builder.session import BuildOptions, BuildSession
    from clawstore.host.machine_settings import backoff_base
    from clawstore.store.claims import ClaimBoard

    with collector_paused():
        if not forget_recorded(store):  # (every batch's lines recorded: nothing to poll)
            return Collected(campaign.campaign_id, 0, [])
        store.adopt_orphans()
        # A session of its own: its log is never written (what it records lands in the action cache).
        log = BuildLog(store, {"id": campaign.campaign_id})
        options = BuildOptions(batch=False, wait=wait, batch_poll_s=poll_s)  # collect only: nothing is submitted
        # The build's client and refusals: a final 402 (a batch line's, a re-creation's) stops every request there
        backoff = backoff_base()
        client = _LazyClient(lambda: _provider_client(backoff), Refusals(COLLECTING))  # (its words: no build ran)
        session = BuildSession(store, log, options, ClaimBoard(store.root, owner=log.build_id),
                               refusals=client.refusals)
        try:
            with store.lease(f"batch collect {log.build_id}"), session.claims:
                nodes, pending, head = _plan_all(campaign, store)
                runs = [n for n in nodes if n.kind == "run" and not n.fresh]
                judges = [n for n in nodes if n.kind == "judge" and n.key not in pending and not n.fresh]
                before = _entries(store, [node.key for node in (*runs, *judges)])
                if runs:
                    batch_runs(session, runs, client)
                if judges:
                    layer = EvalLayer(campaign, store, client, head)
                    batch_judges(layer, session, judges, [])
                keep_collected(store, campaign.campaign_id, before)
        finally:
            client.close()
        return Collected(campaign.campaign_id, log.counts["executed"] + log.counts["failed"], batch_doc.pending(store),
                         client.refusals.message(), CostSum.of_build(log.metrics))



# Refs of what collects outside a build recorded: `collected/<campaign id>` names one object listing the records (a gc
# root, as imports/ is for import-pae), until a build of the whole campaign that started after it has ended
# (`let_go_collected`): its head names them then. docs/batch.md, docs/gc-and-archives.md (Roots and reachability).
COLLECTED = "collected/"


def collected_ref(campaign_id: str) -> str:
    return COLLECTED + campaign_id


def _entries(store: Store, keys: list[str]) -> dict[str, str | None]:
    """{node key: the record its action-cache entry names now, or None}."""
    store.refresh()  # (once: a miss then does not list the index again, key after key)
    return {key: store.get_action_record_id(key, look_again=False) for key in keys}


def keep_collected(store: Store, campaign_id: str, before: dict[str, str | None]) -> None:
    """Name the records this collect recorded (the entries of `before`'s keys that changed) from the campaign's
    `collected/` ref, with those it names already. No head names them until the next build, and the batch's ref goes
    once its every line is recorded: before session 77 a `claw gc` past its grace period in between deleted them, and
    that build paid for every line again (tests/builder/test_build_batch.py). Called under the collect's lease."""
    now = _entries(store, list(before))
    records = {record for key, record in now.items() if record is not None and record != before[key]}
    if not records:
        return
    ref = collected_ref(campaign_id)
    while True:
        current = store.get_ref(ref)
        named = set(store.get_json(current).get("records") or []) if current is not None else set()
        if records <= named:
            return
        with store.batch():  # (durable before the ref names it)
            listing = store.put_json({"kind": "batch_collected", "campaign": campaign_id,
                                      "records": sorted(records | named)})
        try:
            store.set_ref(ref, listing, expected=current)
            return
        except RefConflict:  # another collect of the campaign meanwhile: both kept
            continue


def let_go_collected(store: Store, campaign_id: str, seen: str | None) -> None:
    """A build of the whole campaign has ended, its head naming what was fresh when it planned: the campaign's
    `collected/` ref goes if it still names what it named (`seen`) as that build started (a collect meanwhile: kept for
    the next build)."""
    if seen is None:
        return
    with contextlib.suppress(RefConflict):
        store.delete_ref(collected_ref(campaign_id), expected=seen)
