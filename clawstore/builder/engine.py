"""`claw build`: plan a campaign, reuse what is fresh, execute what is stale, record everything."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawstore.builder.buildlog import BuildLog
from clawstore.builder.claimed import Adopted, claimed
from clawstore.builder.gcpause import resume_collector
from clawstore.builder.lanes import Lane, Lanes
from clawstore.builder.progress import BuildProgress, Failure
from clawstore.builder.progress_choice import open_progress
from clawstore.builder.scheduler import Outcome, run_tasks
from clawstore.builder.unstored import (
    NotStarted,
    StoreTrouble,
    UnstoredAnswer,
    is_store_failure,
    settle_pending,
)
from clawstore.costs import CostSum
from clawstore.errors import StoreError
from clawstore.graph.plan import Node, address_id
from clawstore.graph.records import INFRASTRUCTURE_STATUSES
from clawstore.process_end import sigterm_interrupts
from clawstore.store.claims import ClaimBoard
from clawstore.store.leftovers import remove_leftovers

if TYPE_CHECKING:
    from clawstore.store.store import Store

LOG_WRITE_INTERVAL_S = 2.0


@dataclass
class BuildOptions:
    dry_run: bool = False
    force: bool = False
    max_concurrency: int | None = None
    quiet: bool = False
    filtered: bool = False  # --case/--model given: keep the rest of the campaign head as it was
    max_cost_usd: float | None = None  # --max-cost: no new provider-calling node once this much is spent
    progress: str = "auto"  # auto | live | plain | json | none (clawstore/builder/progress.py)
    planned_cost_usd: float | None = None  # the plan's estimate, shown next to what is spent
    executor: str = "local"  # local | ray: where provider requests run (clawstore/builder/ray_client.py)
    ray_address: str | None = None
    filter: dict[str, list[str]] | None = None  # the --case/--model selection, by id, for the build log
    batch: bool = False  # --batch: judgements go to the provider's Batch API (builder/eval_batch.py)
    wait: bool = False  # --wait: with --batch, poll until every batch is collected
    batch_poll_s: float | None = None  # seconds between polls (default builder/batching.py)
    say: Callable[[str], None] | None = None  # where the build's warnings go (the command's stderr); None: nowhere


@dataclass
class BuildReport:
    campaign_id: str
    build_id: str | None
    runs: list[Node]
    evals: list[Any] = field(default_factory=list)
    eval_addresses: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    stopped: str | None = None  # why scheduling stopped early (the budget), if it did
    failures: list[Failure] = field(default_factory=list)  # each failed node and its one-line reason
    left: int = 0  # nodes an interrupt left unbuilt (the next build builds them)
    orphans: list[str] = field(default_factory=list)  # containers of killed builds it stopped

    @property
    def failed(self) -> bool:
        if self.interrupted:
            return True
        if any(n.action in ("fail", "skip") or (n.record or {}).get("status") != "success"
               for n in self.runs if not n.extra.get("batch")):  # pending in a batch: not a failure
            return True
        return any(not e.ok and not e.pending for e in self.evals)  # pending in a batch: not a failure

    @property
    def pending(self) -> int:
        """Judgements a provider batch still stands for (the next build or `claw batch status` collects)."""
        return sum(1 for n in self.runs if n.extra.get("batch")) + sum(
            1 for e in self.evals for j in e.judges if j.extra.get("batch"))

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


class _Stop:
    """Decides when to stop scheduling, per the run profile's execution policy."""

    def __init__(self, policy: Any):
        self.fail_fast = bool(policy.fail_fast)
        self.stop_on_runner_error = bool(policy.stop_on_runner_error)
        self.reason: str | None = None

    def after(self, status: str | None) -> bool:
        if status is None or status in INFRASTRUCTURE_STATUSES:
            if self.stop_on_runner_error:
                self.reason = "stop_on_runner_error: a run ended with a runner error"
                return False
        if status != "success" and self.fail_fast:
            self.reason = "fail_fast: a run did not succeed"
            return False
        return True


class Budget:
    """`--max-cost`: once the build has spent the limit, nodes that call a provider are not started
    (those already running finish and are kept, so the spend can pass the limit by what was in flight).
    Spent is the reported and priced cost (`metrics.cost_usd`); a build whose cost could be unknown is
    refused before it starts (project/front.py `_within_budget`)."""

    def __init__(self, limit_usd: float, log: BuildLog):
        self.limit_usd = limit_usd
        self.log = log
        self.reason: str | None = None
        # Batch lines this build submitted and has not collected: node key -> their estimated cost. Counted
        # when submitted, settled (replaced by the record's cost) when collected (builder/eval_batch.py).
        self.committed: dict[str, float] = {}

    @property
    def spent(self) -> float:
        return float(self.log.metrics["cost_usd"]) + sum(self.committed.values())

    def reached(self) -> bool:
        return self.spent >= self.limit_usd

    def room_for(self, estimate: float | None) -> bool:
        """May a batch line of this estimated cost still be submitted (an unknown one may not)?"""
        return estimate is not None and self.spent + estimate <= self.limit_usd

    def note_skips(self) -> None:
        spent, pending = CostSum.of_build(self.log.metrics), sum(self.committed.values())
        batches = f" and {pending:.6f} USD estimated for batch lines not collected yet" if pending else ""
        self.reason = (f"--max-cost {self.limit_usd:g} USD reached (spent {spent.usd_text()}{batches}); "
                       "the rest was not started")


def partition(nodes: list[Node], force: bool) -> tuple[list[Node], list[Node]]:
    """(stale: to execute, fresh: to reuse), in plan order; `--force` makes every node stale."""
    stale: list[Node] = []
    fresh: list[Node] = []
    for node in nodes:
        (stale if force or not node.fresh else fresh).append(node)
    return stale, fresh


def execute_nodes(nodes: list[Node], work: Callable[[Node], tuple[str, dict[str, Any]]], concurrency: int,
                  log: BuildLog, progress: BuildProgress, stop: _Stop | None, budget: Budget | None = None,
                  trouble: StoreTrouble | None = None, lanes: Lanes | None = None,
                  lane_of: Callable[[Node], Lane | None] | None = None) -> None:
    """Run `work` on each node under its claim (`log.claims`); record the outcome in the node and the
    build log as it lands. A node another build stored meanwhile is adopted as reused. `lanes`: the
    build's slots and rate limits (lanes.py), `lane_of` a node's provider and model.

    A store write failure (`trouble`) stops scheduling at once; answers the store refused are kept and
    retried once the running nodes are done (clawstore/builder/unstored.py)."""
    if (budget is not None and budget.reached()) or (trouble is not None and trouble.failed):
        nodes, skipped = [], nodes
    else:
        skipped = []
    if nodes:
        resume_collector()
    last_write = time.monotonic()
    store, board = log.store, log.claims

    def record(node: Node, stored: tuple[str, dict[str, Any]]) -> None:
        earlier = node.record_id if node.fresh else None  # a result a failed re-execution leaves in place
        node.record_id, node.record = stored
        status = node.record["status"]
        node.action = "exec" if node.record.get("cacheable") else "fail"
        if node.action == "fail" and earlier is not None:
            node.extra["kept_result"] = earlier
        log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record)
        log.await_durable(node)
        progress.finished(node, status, node.action == "exec" and status in ("success", "passed"))

    def fail(node: Node, error: BaseException) -> None:
        node.action = "fail"
        node.extra["error"] = f"{type(error).__name__}: {error}"
        log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record)
        progress.finished(node, None, False)

    def on_done(outcome: Outcome[Node]) -> bool:
        nonlocal last_write
        node = outcome.task
        if outcome.error is not None and trouble is not None and is_store_failure(outcome.error):
            trouble.note(outcome.error)  # a paid answer is kept for the retry below; nothing new starts
            if isinstance(outcome.error, NotStarted):
                node.action = "skip"
                log.add(node.kind, node.key, None, "skip", node.address, None)
            elif not isinstance(outcome.error, UnstoredAnswer):
                fail(node, outcome.error)
            return False
        if outcome.error is not None:
            if not isinstance(outcome.error, Exception):
                raise outcome.error
            fail(node, outcome.error)
            status = None
        elif isinstance(outcome.value, Adopted):  # another build paid for it
            node.record_id, node.record = outcome.value.record_id, outcome.value.record
            status = node.record["status"]
            node.action = "reuse" if node.record.get("cacheable") else "fail"
            log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record)
            progress.finished(node, status, node.action == "reuse" and status in ("success", "passed"))
        else:
            record(node, outcome.value)
            status = node.record["status"] if node.record else None
        if time.monotonic() - last_write > LOG_WRITE_INTERVAL_S:
            try:
                log.write()  # a killed build still leaves a readable log of what finished
            except StoreError as exc:
                if trouble is None:
                    raise
                trouble.note(exc)
                return False
            last_write = time.monotonic()
        keep = stop.after(status) if stop else True
        return keep and not (budget is not None and budget.reached())

    def started(node: Node) -> tuple[str, dict[str, Any]]:
        progress.started(node)
        return work(node)

    def claimed_work(node: Node) -> Any:
        return claimed(started, store, board, node) if board is not None else started(node)

    never_started = skipped + run_tasks(nodes, claimed_work, concurrency, on_done, on_interrupt=progress.interrupt,
                                        lanes=lanes, lane_of=lane_of)
    if trouble is not None and trouble.kept:
        trouble.retry(record)
        lost = {id(answer.node): answer for answer in trouble.lost}
        for node in nodes:
            if id(node) in lost:
                fail(node, lost[id(node)])
    if never_started and budget is not None and budget.reached():
        budget.note_skips()
    for node in never_started:
        node.action = "skip"
        log.add(node.kind, node.key, None, "skip", node.address, None)


def run_build(campaign: Any, store: Store, options: BuildOptions, *, run_nodes: list[Node],
              run_work: Callable[[Node, str], tuple[str, dict[str, Any]]],
              eval_layer: Any = None, head: tuple[str | None, dict[str, Any]] | None = None,
              run_batches: Callable[..., set[int]] | None = None) -> BuildReport:
    """The whole build: reuse fresh runs, execute stale ones, then the evaluation layers.

    `run_nodes` come with their cached records attached (`attach_records`). `run_batches(stale, log,
    budget, progress)`: the runs that went by provider batch (builder/run_batch.py), not run here."""
    eval_id = campaign.evaluation_profile.evaluation_profile_id if campaign.evaluation_profile else None
    cid = campaign.campaign_id
    report = BuildReport(campaign_id=cid, build_id=None, runs=run_nodes)
    if options.dry_run:
        return report
    policy = campaign.run_profile.execution_policy
    concurrency = options.max_concurrency or policy.max_concurrency
    log = BuildLog(store, {"id": cid, "suite_id": campaign.suite.suite_id,
                           "run_profile_id": campaign.run_profile.run_profile_id,
                           "evaluation_profile_id": eval_id}, filter=options.filter)
    report.build_id = log.build_id
    budget = Budget(options.max_cost_usd, log) if options.max_cost_usd is not None else None
    progress = open_progress(options.progress, planned_cost_usd=options.planned_cost_usd)
    lanes = Lanes(concurrency, on_wait=progress.rate_limited)  # one for every layer: a judge may share a lane
    trouble = StoreTrouble(str(store.root), on_full=store.release_reserve, say=options.say)
    restore = sigterm_interrupts()  # (the claw program does so for every command; this is for a library caller)
    stale, fresh = partition(run_nodes, options.force)
    board = log.claims = ClaimBoard(store.root, owner=log.build_id)
    try:
        # Group commit: one durability barrier per window (store/batch.py) instead of one per node.
        with store.lease(f"build {log.build_id}"), board, store.group_commit():
            remove_leftovers(store)  # temp files and leases of killed writers
            report.orphans = _stop_orphans(store)  # containers killed builds left running
            store.keep_reserve()  # room for what is paid when the disk fills up (store/reserve.py)
            if stale or eval_layer is not None:
                log.write()  # a killed build still leaves its log (a no-op one writes once, at the end)
            for node in fresh:
                node.action = "reuse"
                log.add("run", node.key, node.record_id, "reuse", node.address, node.record)
            if run_batches is not None:
                batched = run_batches(stale, log, budget, progress)
                stale = [n for n in stale if id(n) not in batched]
            progress.phase("runs", stale, [n for n in run_nodes if n.action == "reuse"])
            execute_nodes(stale, lambda n: run_work(n, log.build_id), concurrency, log, progress,
                          _Stop(policy), budget, trouble, lanes, run_lane)
            if eval_layer is not None:
                report.evals = eval_layer.build(run_nodes, log, concurrency, options, budget, progress=progress,
                                                trouble=trouble, lanes=lanes)
                report.eval_addresses = eval_layer.addresses(report.evals)
            settle_pending(store, log, trouble)
            if trouble.failed:
                _end_on_store_failure(log, report, options, head, trouble)
            log.end("complete")
    except KeyboardInterrupt:
        report.interrupted = True
        log.end("interrupted")
        _advance(log, report, options, head)
        report.failures = progress.failures
        raise BuildInterrupted(_left_message(log, progress)) from None
    finally:
        progress.close()
        restore()
    report.failures = progress.failures
    _advance(log, report, options, head)
    report.stopped = budget.reason if budget is not None else None
    report.counts = dict(log.counts)
    report.metrics = dict(log.metrics)
    return report


def run_lane(node: Node) -> Lane | None:
    """An llm_probe run's provider and model (an OpenClaw agent calls its provider itself)."""
    endpoint = node.extra.get("endpoint")
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


def _end_on_store_failure(log: BuildLog, report: BuildReport, options: BuildOptions,
                          head: tuple[str | None, dict[str, Any]] | None, trouble: StoreTrouble) -> None:
    """Record what can still be recorded (the store may take a small log again), then stop with the
    one line that names every paid answer lost."""
    with contextlib.suppress(StoreError):
        log.finish("store-failed")
    with contextlib.suppress(StoreError):
        _advance(log, report, options, head)  # what was stored stays reachable from the campaign head
    raise trouble.error(int(log.counts["skipped"]))


def _advance(log: BuildLog, report: BuildReport, options: BuildOptions,
             head: tuple[str | None, dict[str, Any]] | None) -> None:
    """Advance the campaign head, then write the build log naming it (the log's last write)."""
    planned = {address_id(n.kind, n.address) for n in report.runs} | report.eval_addresses
    try:
        log.advance_head(None if options.filtered else planned, head)
    finally:
        log.write()
    # The manifest is derived from the build log when someone queries it (clawstore/query/manifest.py).
