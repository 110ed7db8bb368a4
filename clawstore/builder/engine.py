"""`claw build`: plan a campaign, reuse what is fresh, execute what is stale, record everything."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawstore.builder.buildlog import UNKNOWN_HEAD, BuildLog, HeadUnknown
from clawstore.builder.execute import Stop, execute_nodes, partition
from clawstore.builder.lanes import Lane, Lanes
from clawstore.builder.legacy_keys import record_under_key_now
from clawstore.builder.progress import BuildProgress, Failure
from clawstore.builder.progress_choice import open_progress
from clawstore.builder.rows import BuildRows
from clawstore.builder.scheduler import deferred_interrupts
from clawstore.builder.session import Budget, BuildOptions, BuildSession
from clawstore.builder.unstored import Stored, StoreTrouble, settle_pending
from clawstore.errors import ClawError, StoreError
from clawstore.graph.plan import Node
from clawstore.host import heap
from clawstore.host.process_end import sigterm_interrupts
from clawstore.store.claims import ClaimBoard
from clawstore.store.core.leftovers import remove_leftovers
from clawstore.values.costs import CostSum

if TYPE_CHECKING:
    from clawstore.builder.eval_layer import EvalLayer, RunEvaluation
    from clawstore.builder.refused import Refusals
    from clawstore.config.campaign import Campaign
    from clawstore.providers.endpoint import Endpoint
    from clawstore.store.store import Store

__all__ = ["BuildOptions", "BuildReport", "BuildInterrupted", "run_build"]  # BuildOptions: session.py's


@dataclass
class BuildReport:
    """What a build did: counts, metrics, failures and its rows (spilled: builder/rows.py), not its nodes."""

    campaign_id: str
    build_id: str | None
    rows: BuildRows = field(default_factory=BuildRows)
    layers: dict[str, Counter[str]] = field(default_factory=dict)  # model id -> nodes per kind, in plan order
    openclaw: bool = False  # some run is an OpenClaw run
    nodes_failed: bool = False  # a run, or an evaluation not pending in a batch, did not succeed
    pending: int = 0  # judgements a provider batch still stands for (the next build or `claw batch status` collects)
    counts: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    stopped: str | None = None  # why scheduling stopped early (the budget), if it did
    failures: list[Failure] = field(default_factory=list)  # each failed node and its one-line reason
    warnings: list[Failure] = field(default_factory=list)  # a node's warning (a prompt its server may have cut)
    left: int = 0  # nodes an interrupt left unbuilt (the next build builds them)
    orphans: list[str] = field(default_factory=list)  # containers of killed builds it stopped
    campaign: dict[str, Any] = field(default_factory=dict)  # the build log's campaign (what its stamp names)

    @property
    def failed(self) -> bool:
        return self.interrupted or self.nodes_failed

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def add_window(self, runs: list[Node], evaluations: list[RunEvaluation] | None) -> None:
        """What the build keeps of a window whose runs and evaluations are done: its rows and what they tell."""
        self.rows.add(runs, evaluations)
        for node in [*runs, *(n for ev in evaluations or () for n in ev.nodes())]:
            self.layers.setdefault(node.address["model_id"], Counter())[node.kind] += 1
        for node in runs:
            self.openclaw = self.openclaw or getattr(node.item, "runner_type", None) == "openclaw"
            if node.batch:  # pending in a batch: not a failure
                self.pending += 1
            elif node.action in ("fail", "skip") or (node.record or {}).get("status") != "success":
                self.nodes_failed = True
        for ev in evaluations or ():
            self.pending += sum(1 for j in ev.judges if j.batch)
            if not ev.ok and not ev.pending:  # pending in a batch: not a failure
                self.nodes_failed = True


class Planned:
    """The addresses (`address_id`) a build keeps in the campaign's head: every run of the campaign, and the
    evaluation nodes of the cases whose windows it evaluated. A set of them would hold four strings a run."""

    def __init__(self, campaign: Campaign, judge_plan: list[tuple[str, int]]):
        self.models = set(campaign.model_ids)
        self.cases = set(campaign.case_ids)
        self.repetitions = {str(r) for r in range(campaign.run_profile.execution_policy.run_repetitions)}
        self.judges = {(judge_run, str(rep)) for judge_run, rep in judge_plan}
        self.evaluated: set[str] = set()  # cases whose evaluation this build concluded

    def __iter__(self) -> Iterator[str]:
        """Every address it holds (made one at a time; `in` is what advancing the head asks)."""
        for model in sorted(self.models):
            for case in sorted(self.cases):
                for rep in sorted(self.repetitions, key=int):
                    yield f"run/{model}/{case}/{rep}"
                    if case in self.evaluated:
                        yield f"checks/{model}/{case}/{rep}"
                        yield from (f"judge/{model}/{case}/{rep}/{run}/{jrep}" for run, jrep in sorted(self.judges))
                        yield f"result/{model}/{case}/{rep}"

    @property
    def nothing(self) -> bool:
        """Does the campaign plan no run (its suite selects no case or lists no model)? Its head is then left as it
        was: an empty one would let gc delete every paid result of a campaign a misspelt tag emptied."""
        return not self.models or not self.cases

    def __contains__(self, address: object) -> bool:
        parts = address.split("/") if isinstance(address, str) else []  # (ids never hold a slash: config/ids.py)
        if len(parts) < 4 or parts[1] not in self.models or parts[2] not in self.cases \
                or parts[3] not in self.repetitions:
            return False
        kind = parts[0]
        if kind == "run" or (kind in ("checks", "result") and parts[2] in self.evaluated):
            return len(parts) == 4
        return (kind == "judge" and parts[2] in self.evaluated and len(parts) == 6
                and (parts[4], parts[5]) in self.judges)


def _stop_orphans(store: Store, build_id: str | None = None) -> list[str]:
    """The OpenClaw containers this store's killed builds (or build `build_id`) left running, stopped
    (runners/openclaw/orphans.py; imported only when a build recorded containers: the runner's modules are many)."""
    if not (store.root / "containers").is_dir():
        return []
    from clawstore.runners.openclaw.orphans import stop_orphans

    return stop_orphans(store, build_id).stopped


RunWindows = Iterable[list[Node]]  # the campaign's run nodes a window at a time, planned with their cached records


def run_build(campaign: Campaign, store: Store, options: BuildOptions, *, windows: RunWindows,
              run_work: Callable[[Node, str], Stored], eval_layer: EvalLayer | None = None,
              run_batches: Callable[[BuildSession, list[Node]], set[int]] | None = None,
              planned_from: str | None | HeadUnknown = UNKNOWN_HEAD, refusals: Refusals | None = None) -> BuildReport:
    """The whole build, a window of runs at a time: reuse fresh runs, execute stale ones, evaluate them; a window's runs
    execute beside the judgements of the window before (docs/building.md, How a build proceeds).

    `windows` yields run nodes with their cached records attached (`attach_records`). `run_batches(session,
    stale)`: the runs that went by provider batch (builder/run_batch.py), not run here. `planned_from`: the campaign
    head `windows` planned from (BuildLog: what the head advance may drop). `refusals`: the endpoints out of credit the
    build's client found (builder/refused.py): their nodes not started yet are skipped."""
    eval_id = campaign.evaluation_profile.evaluation_profile_id if campaign.evaluation_profile else None
    cid = campaign.campaign_id
    report = BuildReport(campaign_id=cid, build_id=None)
    if options.dry_run:
        for runs in windows:
            report.add_window(runs, None)
        return report
    heap.settle()  # (before the build's threads: docs/building.md, Memory)
    policy = campaign.run_profile.execution_policy
    stop = Stop(policy, refusals, lambda node: _endpoint_of(node, eval_layer))
    concurrency = options.max_concurrency or policy.max_concurrency
    log = BuildLog(store, {"id": cid, "suite_id": campaign.suite.suite_id,
                           "run_profile_id": campaign.run_profile.run_profile_id,
                           "evaluation_profile_id": eval_id}, filter=options.filter, planned_from=planned_from,
                   expected=campaign.expected)
    report.build_id, report.campaign = log.build_id, log.doc.campaign
    progress = open_progress(options.progress, planned_cost_usd=options.planned_cost_usd,
                             planned_layers=options.planned_layers, planned_minimum=options.planned_cost_minimum)
    session = BuildSession(
        store, log, options, ClaimBoard(store.root, owner=log.build_id), concurrency, progress,
        budget=Budget(options.max_cost_usd, lambda: log.metrics) if options.max_cost_usd is not None else None,
        trouble=StoreTrouble(str(store.root), on_full=store.release_reserve, say=options.say),
        # one for every layer: a judge may share a lane
        lanes=Lanes(concurrency, on_wait=progress.rate_limited, adaptive=not options.fixed_concurrency,
                    on_limit=progress.in_flight),
        refusals=refusals)
    planned = Planned(campaign, [(jr.judge_run_id, rep) for jr, rep in eval_layer.judge_plan] if eval_layer else [])
    windowed = _Windowed(session, report, planned, stop, lambda n: run_work(n, log.build_id), eval_layer, run_batches)
    restore = sigterm_interrupts()  # (the claw program does so for every command; this is for a library caller)
    # Its lease is held until its log is sealed: a log `running` with its journal and no live lease is a killed
    # build's (spend/killed.py), and moving the head takes seconds on a large campaign (session 73's fuzzer).
    with contextlib.ExitStack() as leased:
        leased.enter_context(store.lease(f"build {log.build_id}"))
        try:
            # Group commit: one durability barrier per window (store/core/batch.py) instead of one per node.
            with session.claims, store.group_commit():
                remove_leftovers(store)  # temp files and leases of killed writers
                report.orphans = _stop_orphans(store)  # containers killed builds left running
                store.keep_reserve()  # room for what is paid when the disk fills up (store/core/reserve.py)
                if eval_layer is not None:
                    log.write()  # a killed build still leaves its log (a no-op one writes once, at the end)
                # A first Ctrl-C anywhere in the windows is noted and taken up at the next safe point (a node's end,
                # a window's start), not raised in the middle of the bookkeeping it lands in.
                with deferred_interrupts() as noted:
                    windowed.build(windows, noted)
                    _stop_if(noted)
                settle_pending(store, log, session.trouble)
                if session.trouble is not None and session.trouble.failed:
                    _end_on_store_failure(session, report, planned)
                remove_leftovers(store)  # and those of a writer killed meanwhile: a build beside this one
                # (a stop: its head is not `complete`, and says what stopped it and how many nodes it never started)
                log.doc.stopped = stop.logged(log.counts["skipped"], session.budget)
                log.end("complete" if log.doc.stopped is None else "stopped")
        except ClawError as error:
            if error.exit_code != 2:
                raise
            # A key missing, a bad URL: found as a window's runs were planned, each window's nodes ended before the next
            # is planned, so nothing is in flight and what the log recorded is all the build spent. Refused before its
            # first node, it leaves no log (as when refused before it made one); else its log ends `refused`.
            if not log.discard():
                log.end("refused")
                _advance(session, planned)
            raise
        except KeyboardInterrupt:
            report.interrupted = True
            log.end("interrupted")
            _advance(session, planned)
            report.failures, report.warnings = progress.failures, progress.warnings
            leased.close()
            # A second Ctrl-C leaves agents running in containers of their own sessions: its lease let go, the build
            # stops them now, as the next build would (an agent looping on tools pays for every request till then).
            stopped = _stop_orphans(store, log.build_id)
            raise BuildInterrupted(_left_message(log, progress, windowed.unplanned(campaign)) + (
                f"; stopped {len(stopped)} OpenClaw container(s) of this build: {', '.join(stopped)}" if stopped
                else "")) from None
        finally:
            progress.close()
            restore()
        report.failures, report.warnings = progress.failures, progress.warnings
        _advance(session, planned)
    stopped = [session.budget.reason if session.budget is not None else None,
               refusals.message() if refusals is not None else None, stop.message()]
    report.stopped = "; ".join(why for why in stopped if why) or None
    report.nodes_failed = report.nodes_failed or bool(refusals)
    report.counts = dict(log.counts)
    report.metrics = dict(log.metrics)
    return report


class _Windowed:
    """The windows of one build: a window's stale runs execute together with the judgements of the window before
    (one `execute_nodes`: the provider lanes stay busy across a window's end), then that window's results are made and
    it is kept as counts and rows (`BuildReport.add_window`), then this window's checks and its judgements planned."""

    def __init__(self, session: BuildSession, report: BuildReport, planned: Planned, stop: Stop,
                 run_work: Callable[[Node], Stored], eval_layer: EvalLayer | None,
                 run_batches: Callable[[BuildSession, list[Node]], set[int]] | None):
        self.session, self.report, self.planned, self.stop = session, report, planned, stop
        self.run_work, self.eval_layer, self.run_batches = run_work, eval_layer, run_batches
        self.planned_runs = 0  # runs of the windows planned so far
        self.logged = eval_layer is not None  # the build log written once before anything executes

    def build(self, windows: RunWindows, noted: list[int]) -> None:
        """`noted`: a first interrupt taken up at each window's start (inside one, the scheduler takes it up)."""
        waiting: tuple[list[Node], list[RunEvaluation], list[Node]] | None = None  # a window whose judges wait
        for runs in windows:
            _stop_if(noted)
            self.planned_runs += len(runs)
            stale = self._runs_phase(runs)
            judges = (self.eval_layer.judge_phase(self.session, waiting[2], len(waiting[0]))
                      if self.eval_layer and waiting else [])
            self._execute(judges + stale)
            if waiting is not None:
                self._conclude(waiting[0], waiting[1])
            waiting = self._prepare(runs)
            del runs, stale, judges
            heap.trim()  # what the window's documents and replies freed, back to the system
        if waiting is not None:
            assert self.eval_layer is not None
            _stop_if(noted)
            self._execute(self.eval_layer.judge_phase(self.session, waiting[2], len(waiting[0])))
            self._conclude(waiting[0], waiting[1])

    def _runs_phase(self, runs: list[Node]) -> list[Node]:
        """Log the window's fresh runs as reused, send what goes by provider batch, show the layer: its stale runs."""
        session, log = self.session, self.session.log
        stale, fresh = partition(runs, session.options.force)
        for node in fresh:
            node.action = "reuse"
            record_under_key_now(session.store, node)  # (found under its legacy key: named by its key now)
            log.add("run", node.key, node.record_id, "reuse", node.address, node.record)
            node.release()
        if self.run_batches is not None:
            batched = self.run_batches(session, stale)
            stale = [n for n in stale if id(n) not in batched]
        session.progress.phase("runs", stale, [n for n in runs if n.action == "reuse"])
        if stale and not self.logged:
            log.write()  # a killed build still leaves its log (a no-op one writes once, at the end)
            self.logged = True
        return stale

    def _execute(self, nodes: list[Node]) -> None:
        """Runs and judgements together, each on its lane (both paid: --max-cost gates both; a stop, only runs)."""
        eval_layer = self.eval_layer
        judge_work = eval_layer.judge_work(self.session) if eval_layer is not None else None

        def work(node: Node) -> Stored:
            if node.kind == "run":
                return self.run_work(node)
            assert judge_work is not None
            return judge_work(node)

        def lane_of(node: Node) -> Lane | None:
            if node.kind == "run":
                return run_lane(node)
            assert eval_layer is not None
            return eval_layer.judge_lane(node)

        execute_nodes(self.session, nodes, work, stop=self.stop, lane_of=lane_of)

    def _prepare(self, runs: list[Node]) -> tuple[list[Node], list[RunEvaluation], list[Node]] | None:
        """The window's checks built and its judgements planned (None: no evaluation; the window is done)."""
        if self.eval_layer is None:
            self.report.add_window(runs, None)
            return None
        evaluations, judges = self.eval_layer.prepare(self.session, runs)
        return runs, evaluations, judges

    def _conclude(self, runs: list[Node], evaluations: list[RunEvaluation]) -> None:
        assert self.eval_layer is not None
        self.report.add_window(runs, self.eval_layer.conclude(self.session, evaluations))
        cases = {str(node.address["case_id"]) for node in runs}
        self.planned.evaluated |= cases
        self.eval_layer.forget_cases(cases)  # (a window holds whole cases: no later window has them)

    def unplanned(self, campaign: Campaign) -> int:
        """Runs of windows not planned yet (an interrupt's message counts them apart)."""
        return max(0, len(campaign.items) * campaign.run_profile.execution_policy.run_repetitions - self.planned_runs)


def _stop_if(noted: list[int]) -> None:
    if noted:
        raise KeyboardInterrupt


def _endpoint_of(node: Node, eval_layer: EvalLayer | None) -> Endpoint | None:
    """Where a run or judgement sends its requests: through the build's client, or an OpenClaw agent's own, to its
    model's endpoint (a 402 from either stops both: builder/refused.py)."""
    if node.kind == "run":
        return node.endpoint
    if node.kind == "judge" and eval_layer is not None:
        return eval_layer.judge_endpoint(node)
    return None


def run_lane(node: Node) -> Lane | None:
    """An llm_probe run's provider and model (an OpenClaw agent calls its provider itself)."""
    endpoint = node.endpoint
    if endpoint is None or node.item.runner_type != "llm_probe":
        return None
    return Lane(endpoint.base_url, node.item.resolved_model, label=str(node.address.get("model_id", "")))


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: what finished is committed; the message says what was left."""


def _left_message(log: BuildLog, progress: BuildProgress, unplanned: int) -> str:
    counts = log.counts
    state = progress.state
    left = max(0, state.total - state.done)
    later = f" and {unplanned} run(s) of windows not planned yet" if unplanned else ""
    # (failed nodes too: a judgement that ran and failed was paid for, and "0 node(s) executed" read as none had run)
    failed = f", {counts['failed']} failed (recorded, with their cost)" if counts.get("failed") else ""
    # (cancelled by a second Ctrl-C: their requests, an agent's many, were sent; unsaid, '0 executed' read as 0 spent)
    running = progress.running()
    cancelled = f"; {running} running node(s) cancelled: what they spent is not counted" if running else ""
    # (no table nor totals line follows: what the committed nodes cost went unsaid, session 77)
    spent = CostSum.of_build(log.metrics).usd_text()
    # (a layer's nodes join the total as it begins: among the judgements, the results were not counted, and the user
    # read "1 planned node(s) left unbuilt" where four were; session 78)
    layers = ", ".join(label for label, count in state.phases.items() if count) or "none"
    return (f"interrupted: {counts.get('executed', 0)} node(s) executed{failed} and {counts.get('reused', 0)} reused "
            f"are committed, cost spent {spent}; {left} node(s) left unbuilt in the layers begun ({layers}){later}: "
            f"the layers after them and the evaluation of runs not reached are not counted (claw status counts every "
            f"node left){cancelled}; the next build resumes from here")


def _end_on_store_failure(session: BuildSession, report: BuildReport, planned: Planned) -> None:
    """Record what can still be recorded (the store may take a small log again), then stop with the
    one line that names every paid answer lost."""
    log = session.log
    with contextlib.suppress(StoreError):
        log.finish("store-failed")
    with contextlib.suppress(StoreError):
        _advance(session, planned)  # what was stored stays reachable from the campaign head
    assert session.trouble is not None
    raise session.trouble.error(int(log.counts["skipped"]))


def _advance(session: BuildSession, planned: Planned) -> None:
    """Advance the campaign head, then write the build log naming it (its last write: sealed, its nodes inline)."""
    try:
        session.log.advance_head(None if session.options.filtered or planned.nothing else planned)
    finally:
        session.log.seal()
    # The manifest is derived from the build log when someone queries it (clawstore/query/manifest.py).
