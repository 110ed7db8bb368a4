"""`claw build`: plan a campaign, reuse what is fresh, execute what is stale, record everything."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawstore.builder.buildlog import BuildLog
from clawstore.builder.execute import Stop, execute_nodes, partition
from clawstore.builder.lanes import Lane, Lanes
from clawstore.builder.progress import BuildProgress, Failure
from clawstore.builder.progress_choice import open_progress
from clawstore.builder.session import Budget, BuildOptions, BuildSession
from clawstore.builder.unstored import Stored, StoreTrouble, settle_pending
from clawstore.errors import StoreError
from clawstore.graph.plan import HeadNodes, Node, address_id
from clawstore.host.process_end import sigterm_interrupts
from clawstore.store.claims import ClaimBoard
from clawstore.store.core.leftovers import remove_leftovers

if TYPE_CHECKING:
    from clawstore.builder.eval_layer import EvalLayer, RunEvaluation
    from clawstore.config.campaign import Campaign
    from clawstore.store.store import Store

__all__ = ["BuildOptions", "BuildReport", "BuildInterrupted", "run_build"]  # BuildOptions: session.py's


@dataclass
class BuildReport:
    campaign_id: str
    build_id: str | None
    runs: list[Node]
    evals: list[RunEvaluation] = field(default_factory=list)
    eval_addresses: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    stopped: str | None = None  # why scheduling stopped early (the budget), if it did
    failures: list[Failure] = field(default_factory=list)  # each failed node and its one-line reason
    left: int = 0  # nodes an interrupt left unbuilt (the next build builds them)
    orphans: list[str] = field(default_factory=list)  # containers of killed builds it stopped
    campaign: dict[str, Any] = field(default_factory=dict)  # the build log's campaign (what its stamp names)

    @property
    def failed(self) -> bool:
        if self.interrupted:
            return True
        if any(n.action in ("fail", "skip") or (n.record or {}).get("status") != "success"
               for n in self.runs if not n.batch):  # pending in a batch: not a failure
            return True
        return any(not e.ok and not e.pending for e in self.evals)  # pending in a batch: not a failure

    @property
    def pending(self) -> int:
        """Judgements a provider batch still stands for (the next build or `claw batch status` collects)."""
        return sum(1 for n in self.runs if n.batch) + sum(
            1 for e in self.evals for j in e.judges if j.batch)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def _stop_orphans(store: Store) -> list[str]:
    """The OpenClaw containers this store's killed builds left running, stopped (runners/openclaw/orphans.py;
    imported only when a build recorded containers: the runner's modules are many)."""
    if not (store.root / "containers").is_dir():
        return []
    from clawstore.runners.openclaw.orphans import stop_orphans

    return stop_orphans(store).stopped


def run_build(campaign: Campaign, store: Store, options: BuildOptions, *, run_nodes: list[Node],
              run_work: Callable[[Node, str], Stored], eval_layer: EvalLayer | None = None,
              head: tuple[str | None, HeadNodes] | None = None,
              run_batches: Callable[[BuildSession, list[Node]], set[int]] | None = None) -> BuildReport:
    """The whole build: reuse fresh runs, execute stale ones, then the evaluation layers.

    `run_nodes` come with their cached records attached (`attach_records`). `run_batches(session,
    stale)`: the runs that went by provider batch (builder/run_batch.py), not run here."""
    eval_id = campaign.evaluation_profile.evaluation_profile_id if campaign.evaluation_profile else None
    cid = campaign.campaign_id
    report = BuildReport(campaign_id=cid, build_id=None, runs=run_nodes)
    if options.dry_run:
        return report
    policy = campaign.run_profile.execution_policy
    stop = Stop(policy)
    concurrency = options.max_concurrency or policy.max_concurrency
    log = BuildLog(store, {"id": cid, "suite_id": campaign.suite.suite_id,
                           "run_profile_id": campaign.run_profile.run_profile_id,
                           "evaluation_profile_id": eval_id}, filter=options.filter)
    report.build_id, report.campaign = log.build_id, log.doc.campaign
    progress = open_progress(options.progress, planned_cost_usd=options.planned_cost_usd)
    session = BuildSession(
        store, log, options, ClaimBoard(store.root, owner=log.build_id), concurrency, progress,
        budget=Budget(options.max_cost_usd, lambda: log.metrics) if options.max_cost_usd is not None else None,
        trouble=StoreTrouble(str(store.root), on_full=store.release_reserve, say=options.say),
        lanes=Lanes(concurrency, on_wait=progress.rate_limited))  # one for every layer: a judge may share a lane
    restore = sigterm_interrupts()  # (the claw program does so for every command; this is for a library caller)
    stale, fresh = partition(run_nodes, options.force)
    try:
        # Group commit: one durability barrier per window (store/core/batch.py) instead of one per node.
        with store.lease(f"build {log.build_id}"), session.claims, store.group_commit():
            remove_leftovers(store)  # temp files and leases of killed writers
            report.orphans = _stop_orphans(store)  # containers killed builds left running
            store.keep_reserve()  # room for what is paid when the disk fills up (store/core/reserve.py)
            if stale or eval_layer is not None:
                log.write()  # a killed build still leaves its log (a no-op one writes once, at the end)
            for node in fresh:
                node.action = "reuse"
                log.add("run", node.key, node.record_id, "reuse", node.address, node.record)
                node.release()
            if run_batches is not None:
                batched = run_batches(session, stale)
                stale = [n for n in stale if id(n) not in batched]
            progress.phase("runs", stale, [n for n in run_nodes if n.action == "reuse"])
            execute_nodes(session, stale, lambda n: run_work(n, log.build_id), stop=stop, lane_of=run_lane)
            if eval_layer is not None:
                report.evals, report.eval_addresses = eval_layer.build(session, run_nodes)
            settle_pending(store, log, session.trouble)
            if session.trouble is not None and session.trouble.failed:
                _end_on_store_failure(session, report, head)
            log.end("complete")
    except KeyboardInterrupt:
        report.interrupted = True
        log.end("interrupted")
        _advance(session, report, head)
        report.failures = progress.failures
        raise BuildInterrupted(_left_message(log, progress)) from None
    finally:
        progress.close()
        restore()
    report.failures = progress.failures
    _advance(session, report, head)
    report.stopped = session.budget.reason if session.budget is not None else None
    report.counts = dict(log.counts)
    report.metrics = dict(log.metrics)
    return report


def run_lane(node: Node) -> Lane | None:
    """An llm_probe run's provider and model (an OpenClaw agent calls its provider itself)."""
    endpoint = node.endpoint
    if endpoint is None or node.item.runner_type != "llm_probe":
        return None
    return Lane(endpoint.base_url, node.item.resolved_model, label=str(node.address.get("model_id", "")))


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: what finished is committed; the message says what was left."""


def _left_message(log: BuildLog, progress: BuildProgress) -> str:
    counts = log.counts
    state = progress.state
    left = max(0, state.total - state.done)
    return (f"interrupted: {counts.get('executed', 0)} node(s) executed and {counts.get('reused', 0)} reused are "
            f"committed; {left} planned node(s) left unbuilt (evaluation of runs not reached is not counted); "
            f"the next build resumes from here")


def _end_on_store_failure(session: BuildSession, report: BuildReport,
                          head: tuple[str | None, HeadNodes] | None) -> None:
    """Record what can still be recorded (the store may take a small log again), then stop with the
    one line that names every paid answer lost."""
    log = session.log
    with contextlib.suppress(StoreError):
        log.finish("store-failed")
    with contextlib.suppress(StoreError):
        _advance(session, report, head)  # what was stored stays reachable from the campaign head
    assert session.trouble is not None
    raise session.trouble.error(int(log.counts["skipped"]))


def _advance(session: BuildSession, report: BuildReport, head: tuple[str | None, HeadNodes] | None) -> None:
    """Advance the campaign head, then write the build log naming it (its last write: sealed, its nodes inline)."""
    planned = {address_id(n.kind, n.address) for n in report.runs} | report.eval_addresses
    try:
        session.log.advance_head(None if session.options.filtered else planned, head)
    finally:
        session.log.seal()
    # The manifest is derived from the build log when someone queries it (clawstore/query/manifest.py).
