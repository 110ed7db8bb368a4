"""Execute a layer's stale nodes: each under its work claim, recorded in the build log as it lands."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from clawstore.builder.buildlog import planning_view
from clawstore.builder.claimed import Adopted, InBatch, claimed
from clawstore.builder.cyclic_gc import collect_fully_seldom, resume_collector
from clawstore.builder.lanes import Lane
from clawstore.builder.legacy_keys import record_under_key_now
from clawstore.builder.scheduler import Later, Outcome, run_here, run_tasks
from clawstore.builder.session import requested_model, unknown_cost_of
from clawstore.builder.unstored import (
    NotStarted,
    Stored,
    UnrecordedAnswer,
    UnstoredAnswer,
    is_store_failure,
    unrecorded_cost,
)
from clawstore.errors import StoreError
from clawstore.graph.plan import Node, address_id

if TYPE_CHECKING:
    from clawstore.builder.refused import Refusals
    from clawstore.builder.session import Budget, BuildSession
    from clawstore.config.models import ExecutionPolicy
    from clawstore.providers.endpoint import Endpoint

LOG_WRITE_INTERVAL_S = 2.0
_STOPPED = object()  # what a run a stop kept from starting returns (it is logged as skipped)


class Stop:
    """Decides when to stop starting runs, per the run profile's execution policy. Only runs are judged, and only runs
    are stopped: a judgement beside them (a windowed build overlaps one window's runs with the last one's judgements:
    builder/engine.py) goes on as it would after the runs. But whatever the policy, no run or judgement starts whose
    endpoint is out of credit (`refusals`: a final 402 came from it; `endpoint_of(node)`: where a node sends)."""

    def __init__(self, policy: ExecutionPolicy, refusals: Refusals | None = None,
                 endpoint_of: Callable[[Node], Endpoint | None] | None = None):
        self.fail_fast = bool(policy.fail_fast)
        self.stop_on_runner_error = bool(policy.stop_on_runner_error)
        self.reason: str | None = None
        self.by: str | None = None  # the execution_policy setting that stopped the build (documents.STOPPED_BY)
        self.refusals, self.endpoint_of = refusals, endpoint_of
        self.runs_skipped = 0  # runs this stop kept from starting (the summary's `stopped:` counts them)

    def refused(self, node: Node) -> bool:
        """Does `node` send to an endpoint that refused this build?"""
        refusals, endpoint_of = self.refusals, self.endpoint_of
        if not refusals or endpoint_of is None:  # (none refused: no step per node)
            return False
        return refusals.refuses(endpoint_of(node))

    def stops(self, node: Node) -> bool:
        """Is `node` one this stop keeps from starting, now?"""
        return (self.reason is not None and node.kind == "run") or self.refused(node)

    def skipped(self, node: Node) -> None:
        """`node` was not started: counted among what its endpoint's refusal left undone, if it was that, else among
        the runs this stop kept from starting."""
        if self.refusals is not None and self.refused(node):
            self.refusals.skipped(node.kind)
        elif self.reason is not None and node.kind == "run":
            self.runs_skipped += 1

    def message(self) -> str | None:
        """What the build's summary says of this stop (`stopped:`), None when it did not stop or skipped nothing: before
        session 78 it said nothing, and the user read "2 skipped" beside one failed run without a reason."""
        if self.reason is None or not self.runs_skipped:
            return None
        return (f"{self.reason}; {self.runs_skipped} run(s) not started (skip; the run profile's execution_policy: "
                "the next build runs them)")

    def after(self, status: str | None, fault: bool, node: Node | None = None) -> bool:
        """`fault`: the run ended in a fault (not cached: a provider error, a timeout, a failure), not in an outcome
        of the model's (an OpenClaw agent that used its whole timeout is `timed_out` and the agent's). `node`: that
        run, named in the reason (the first one to stop the build)."""
        named = f" ({address_id(node.kind, node.address)}: {status or 'failed'})" if node is not None else ""
        if fault:
            if self.stop_on_runner_error:
                self.reason = self.reason or f"stop_on_runner_error: a run ended with a runner error{named}"
                self.by = self.by or "stop_on_runner_error"
                return False
        if status != "success" and self.fail_fast:
            self.reason = self.reason or f"fail_fast: a run did not succeed{named}"
            self.by = self.by or "fail_fast"
            return False
        return True

    def logged(self, skipped: int, budget: Budget | None) -> dict[str, object] | None:
        """What the build log (and the head it writes) keeps of the stops that kept nodes from starting:
        BuildLogDoc.stopped, `by` the one that kept the most (documents.STOPPED_BY), None when none kept any.
        `skipped`: the nodes the build logged `skip`, of every kind (a build that ends skips a node only for a stop:
        --max-cost, a refusal, this policy; the batch layer's lines over the limit too); `budget`: its --max-cost."""
        refused = sum(self.refusals.not_started.values()) if self.refusals is not None else 0
        policy = self.runs_skipped if self.by is not None else 0
        over = skipped - refused - policy if budget is not None and budget.reason is not None else 0
        kept = {"max_cost": over, "out_of_credit": refused, self.by or "": policy}
        by, most = max(kept.items(), key=lambda cause: cause[1])
        return {"by": by, "nodes_not_started": skipped} if skipped and most > 0 else None


def partition(nodes: list[Node], force: bool) -> tuple[list[Node], list[Node]]:
    """(stale: to execute, fresh: to reuse), in plan order; `--force` makes every node stale."""
    stale: list[Node] = []
    fresh: list[Node] = []
    for node in nodes:
        (stale if force or not node.fresh else fresh).append(node)
    return stale, fresh


def execute_nodes(session: BuildSession, nodes: list[Node], work: Callable[[Node], Stored], *,
                  stop: Stop | None = None, paid: bool = True,
                  lane_of: Callable[[Node], Lane | None] | None = None, here: bool = False) -> None:
    """Run `work` on each node under its claim and record each outcome in the node and the build log as it lands; a node
    another build stored meanwhile is adopted as reused. `paid`: gated by the budget; `lane_of`: the node's lane;
    `here`: cheap local work, run in this thread (no worker thread, lane or hand-off; a node another build holds
    is waited for by the scheduler). Details: docs/building.md (Details by module)."""
    log, progress, trouble = session.log, session.progress, session.trouble
    budget = session.budget if paid else None
    if (budget is not None and budget.reached()) or (trouble is not None and trouble.failed):
        nodes, skipped = [], nodes
    else:
        skipped = [n for n in nodes if stop is not None and stop.stops(n)]
        nodes = [n for n in nodes if not (stop is not None and stop.stops(n))] if skipped else nodes
    stopped: list[Node] = []  # runs a stop kept from starting once it was scheduled
    if nodes:
        resume_collector()
        collect_fully_seldom()
    last_write = time.monotonic()
    store, board = session.store, session.claims

    def record(node: Node, stored: Stored) -> None:
        earlier = node.record_id if node.fresh else None  # a result a failed re-execution leaves in place
        node.record_id, record = stored
        progress.warned(node, record)
        node.record = planning_view(record)  # all the build reads of it again (the full record is stored)
        status = node.record["status"]
        node.action = "exec" if node.record.get("cacheable") else "fail"
        if node.action == "fail" and earlier is not None:
            node.kept_result = earlier
        log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record)
        log.await_durable(node)
        progress.finished(node, status, node.action == "exec" and status in ("success", "passed"))
        node.release()

    def fail(node: Node, error: BaseException) -> bool:
        """True when what it spent is known to this log alone (a paid node without a record): written at once."""
        node.action = "fail"
        shown = error.cause if isinstance(error, UnrecordedAnswer) else error
        node.error = f"{type(shown).__name__}: {shown}"
        # (what this execution spent, not the earlier record's: a node failed here has no record of its own)
        spent = unrecorded_cost(node.kind, error)
        log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record, spent=spent)
        progress.finished(node, None, False, spent)
        return spent is not None

    def on_done(outcome: Outcome[Node, Stored | Adopted]) -> bool:
        """`finished`, and the first node whose cost makes the budget's spend unknown noted for its stop."""
        if budget is None or budget.unknown_first is not None or budget.unknown():
            return finished(outcome)
        model = requested_model(outcome.task)  # (read before its record releases the document)
        go_on = finished(outcome)
        if budget.unknown():
            budget.unknown_first = unknown_cost_of(outcome.task, model)
        return go_on

    def finished(outcome: Outcome[Node, Stored | Adopted]) -> bool:
        nonlocal last_write
        node = outcome.task
        only_here = False  # paid with no record: the store never learns of it, this log must before a kill
        if outcome.value is _STOPPED:
            stopped.append(node)
            return True
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
            only_here = fail(node, outcome.error)
            status = None
        elif isinstance(outcome.value, InBatch):  # another build's batch stands for it: pending, as if submitted here
            node.batch = outcome.value.name
            progress.pending(node, node.batch)
            return True
        elif isinstance(outcome.value, Adopted):  # another build paid for it
            node.record_id, node.record = outcome.value.record_id, planning_view(outcome.value.record)
            status = node.record["status"]
            node.action = "reuse" if node.record.get("cacheable") else "fail"
            record_under_key_now(store, node)  # (adopted under its legacy key, builder/claimed.py: its key now)
            log.add(node.kind, node.key, node.record_id, node.action, node.address, node.record)
            progress.finished(node, status, node.action == "reuse" and status in ("success", "passed"), adopted=True)
            node.release()
        else:
            record(node, outcome.value)
            status = node.record["status"] if node.record else None
        # A paid node without a record is written at once: at the next periodic write (a node's end 2 s on) a kill
        # meanwhile, its other requests in flight, left what it paid counted nowhere (tests/faults/
        # test_killed_unrecorded.py). A recorded node is in the store's pack from its end (adopted after a kill).
        if only_here or time.monotonic() - last_write > LOG_WRITE_INTERVAL_S:
            try:
                log.write()  # a killed build still leaves a readable log of what finished
            except StoreError as exc:
                if trouble is None:
                    raise
                trouble.note(exc)
                return False
            last_write = time.monotonic()
        if stop is not None and node.kind == "run":
            # (runs not started yet are stopped as they come up: `claimed_work`; a run that raised has no record of its
            # own, and node.record is still a --force'd node's earlier result)
            stop.after(status, status is None or not (node.record or {}).get("cacheable"), node)
        return not (budget is not None and budget.reached())

    def started(node: Node) -> Stored:
        progress.started(node)
        return work(node)

    def claimed_work(node: Node) -> Stored | Adopted | Later | object:
        if stop is not None and stop.stops(node):
            return _STOPPED
        return claimed(started, store, board, node, unpaid_here=here and not paid, one_by_one=paid)

    def scheduled(tasks: list[Node]) -> list[Node]:
        return run_tasks(tasks, claimed_work, session.concurrency, on_done, on_interrupt=progress.interrupt,
                         lanes=session.lanes, lane_of=lane_of, on_idle=progress.idle)

    if here:
        never_started = skipped + run_here(nodes, claimed_work, on_done, scheduled, on_interrupt=progress.interrupt,
                                           on_idle=progress.idle)
    else:
        never_started = skipped + scheduled(nodes)
    never_started += stopped
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
        if stop is not None:
            stop.skipped(node)
