"""The front every command calls (as DVC's `Repo`): one workspace's store and campaign, each opened once.

A command parses its arguments, asks a `Project`, and renders what it returns. What is said while the
work runs (the configs' warnings, a remote's pull and push summaries, a store that cannot be written)
goes to `say`, the command's stderr; failures are typed errors (clawstore/errors.py), whose exit codes
only the CLI applies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from clawstore.errors import StoreError, UsageError
from clawstore.project import stamping
from clawstore.project.places import head_stopped, never_built_message, open_store, resolve_store_dir

if TYPE_CHECKING:
    from clawstore.builder.api import NodeState, UntrustedSeen
    from clawstore.builder.batch_collect import Collected
    from clawstore.builder.casestamp import ByCase
    from clawstore.builder.engine import BuildReport
    from clawstore.builder.request import CampaignRequest
    from clawstore.config.campaign import Campaign
    from clawstore.config.parsed import ParsedCases
    from clawstore.project import keeping  # (imported by the methods that keep: gc, pins, refs, archives)
    from clawstore.remote.config import Remote
    from clawstore.spend.estimate import SpendPlan
    from clawstore.spend.killed import KilledBuild
    from clawstore.store.services.archive import ArchiveSummary
    from clawstore.store.store import Store

Say = Callable[[str], None]

# What a no-op build answered from its stamp spent: nothing.


class BudgetRefused(UsageError):
    """`build --max-cost`: the plan's estimate exceeds the budget, or cannot be made; nothing was sent."""

    def __init__(self, plan: SpendPlan, why: str):
        super().__init__(f"{why}; nothing was sent")
        self.plan = plan


class Unbuilt(NamedTuple):
    """What an export leaves a build of the archive to pay for: nodes stale or never built, and how many of them a
    batch of this store's stands for (collected here, never there: batch refs do not travel in an archive)."""

    count: int
    batched: int


@dataclass(frozen=True)
class BuildSettings:
    """The flags of one `claw build` beyond the campaign's."""

    force: bool = False
    max_concurrency: int | None = None
    fixed_concurrency: bool = False
    max_cost: float | None = None
    executor: str = "local"
    ray_address: str | None = None
    remote: str | None = None
    batch: bool = False
    wait: bool = False
    quiet: bool = False
    progress: str = "auto"


@dataclass
class Built:
    """What a build did, as `claw build` shows it (from its report, or from the stamp of a no-op)."""

    campaign_id: str
    build_id: str | None
    rows: Iterable[dict[str, Any]]  # (a build's: read back from its files, builder/rows.py; iterable again)
    counts: dict[str, int]
    metrics: dict[str, Any]
    failures: list[tuple[str, str]] = field(default_factory=list)
    stopped: str | None = None
    exit_code: int = 0
    pending: int = 0
    orphans: list[str] = field(default_factory=list)  # containers of killed builds it stopped
    from_stamp: bool = False
    notes: list[str] = field(default_factory=list)  # said before the rows
    killed: list[KilledBuild] = field(default_factory=list)  # named in `notes`; `--output json`'s `killed_builds`
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (node, warning): a prompt its server may have cut

    def close(self) -> None:
        """Let go of the rows' files (a build's are temporary files, builder/rows.py; a stamp's are a list): left to
        the garbage collector, an in-process caller's builds kept them open until it ran."""
        closing = getattr(self.rows, "close", None)
        if closing is not None:
            closing()

    @classmethod
    def of(cls, report: BuildReport) -> Built:
        return cls(report.campaign_id, report.build_id, report.rows, report.counts, report.metrics,
                   [(f.node, f.reason) for f in report.failures], report.stopped, report.exit_code,
                   report.pending, report.orphans, warnings=[(w.node, w.reason) for w in report.warnings])


def _killed(store: Store, campaign_id: str) -> list[KilledBuild]:
    """The campaign's builds killed and not told of yet (a store that no build left a journal in is not asked: none
    was killed)."""
    from clawstore.spend.killed import killed_builds
    from clawstore.store.buildlogs import journals

    try:  # (a note: never what fails a build, nor stops it from starting)
        return killed_builds(store, campaign_id) if journals(store.root) else []
    except (OSError, StoreError):
        return []


def _name_killed(store: Store, campaign_id: str, at_start: list[KilledBuild],
                 build_id: str | None, whole: bool = True) -> tuple[list[KilledBuild], list[str]]:
    """A build's notes at its end: the builds of its campaign killed and not told of yet, those it found killed at its
    start and those killed beside it (a user who ran both learns it here). The first are told of now (their logs say
    so: named no more); the others were alive when it started, and `claw status` goes on naming them until a build
    that found them killed ends (spend/killed.py). Returned with the builds they name. A filtered build (`whole`
    False) tells of none: its head adopts only its filter's records, and a killed build's log stays gc's root of the
    others it paid for (store/buildlogs.py unadopted_records) until a build of the whole campaign ends."""
    from clawstore.spend.killed import killed_notes, tell

    killed = _killed(store, campaign_id)
    started = {k.build_id for k in at_start}
    if whole:
        tell(store, [k for k in killed if k.build_id in started], build_id or "")
    return killed, [f"claw: note: {line}" for line in killed_notes(store, killed)]


@dataclass
class Inspection:
    """The states of the nodes asked for in the campaign's order, and why the campaign has no head if it has none."""

    campaign_id: str
    states: Iterable[NodeState]  # (read back from a file a window wrote them to: iterable once)
    never_built: str | None
    nodes: int = 0  # every node of the campaign, those `states` leaves out too


@dataclass
class Status:
    """Nodes per model, layer and state; the requests provider batches still hold."""

    campaign_id: str
    per_model: dict[str, dict[str, Counter[str]]]
    never_built: str | None = None
    pending: int = 0  # requests pending in provider batches
    recorded: int = 0  # batch lines recorded just now
    stopped: str | None = None  # collecting them met an endpoint out of credit (a final 402): the build's line
    spent: str | None = None  # what the lines recorded just now cost, as a build's line says it ("0.0012 USD")
    head_stopped: dict[str, Any] | None = None  # the head's build was stopped (places.head_stopped)


def _fresh_runs(per_model: dict[str, dict[str, Counter[str]]]) -> int:
    """The runs `claw status` counts fresh (its table's FRESH of the run layer)."""
    return sum(kinds["run"]["fresh"] for kinds in per_model.values() if "run" in kinds)


class Project:
    """A workspace's store (--store, $CLAW_STORE, else its store/) and the campaign `request` names.

    The campaign is loaded once, when first needed (a no-op build answered from its stamp never loads
    it); the store is opened once the configs are known to be good, so a command that fails first
    creates nothing (and with `create_store` False, nothing at all). With `absent_empty` (the commands that only
    read), a store that is not there is read as an empty one and nothing is made (project/absent.py)."""

    def __init__(self, store_dir: Path | None, say: Say, request: CampaignRequest | None = None,
                 create_store: bool = True, absent_empty: bool = False):
        self.store_dir = store_dir
        self.say = say
        self._request = request
        self.create_store = create_store
        self.absent_empty = absent_empty
        self._store: Store | None = None

    @property
    def request(self) -> CampaignRequest:
        if self._request is None:
            raise TypeError("this project was opened without a campaign")
        return self._request

    # -------------------------------------------------------------- the store and the campaign, once

    def exists(self, root: Path) -> bool:
        """Would opening the store create it?"""
        from clawstore.store.core.layout import FORMAT_FILE

        return (resolve_store_dir(self.store_dir, root) / FORMAT_FILE).is_file()

    def close(self) -> None:
        """Close the stores this front opened (a process that opens many projects keeps no files of theirs
        open); a store is opened again if the front is used again."""
        opened = [self._store, self.__dict__.pop("existing_store", None)]
        self._store = None
        for store in opened:
            if store is not None:
                store.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self, root: Path) -> Store:
        from clawstore.project.absent import EmptyStore, absent
        from clawstore.store import Store

        if self._store is None:
            path = resolve_store_dir(self.store_dir, root)
            if self.absent_empty and absent(path):
                self._store = EmptyStore(path)
            else:
                self._store = Store(path, create=self.create_store)
        return self._store

    @functools.cached_property
    def campaign(self) -> Campaign:
        """The campaign the request names, its configs loaded (the cyclic collector paused: builder/cyclic_gc.py)."""
        from clawstore.builder.api import load_campaign, openclaw_reach_warnings
        from clawstore.builder.cyclic_gc import collector_paused

        with collector_paused():
            campaign = load_campaign(self.request, self._parsed)
        self._parsed.loaded(writes=not self.absent_empty)  # (a command that only reads writes none)
        for warning in (*campaign.warnings, *openclaw_reach_warnings(campaign)):
            self.say(f"warning: {warning}")
        return campaign

    @functools.cached_property
    def _parsed(self) -> ParsedCases:
        """The case files the last build that planned in this store parsed, by their bytes (config/parsed.py), for a
        command that only reads (`absent_empty`); none for the others: a build parses every case (what it sends is
        what the files hold, never an entry of derived data), and writes them."""
        from clawstore.builder.parsed_cases import for_store
        from clawstore.config.parsed import ParsedCases
        from clawstore.project.places import workspace_root

        if not self.absent_empty:
            return ParsedCases()
        return for_store(resolve_store_dir(self.store_dir, workspace_root(self.request.cwd)))

    def _keep_parsed(self, store: Store) -> None:
        """What this build's load parsed, for the read commands after it (builder/parsed_cases.py)."""
        from clawstore.builder.parsed_cases import write

        ws = self.campaign.workspace
        if ws is not None and ws.parsed is not None:
            write(Path(store.root), ws.parsed, {entry.file: entry.validated_from for entry in ws.cases.values()})

    @property
    def store(self) -> Store:
        return self.open(self.campaign.root)

    @functools.cached_property
    def existing_store(self) -> Store:
        """The store of a command outside a campaign (--store, $CLAW_STORE, else the cwd's workspace's):
        it must exist."""
        return open_store(self.store_dir)

    def whole_campaign(self, what: str) -> Campaign:
        """The campaign, for `what` that covers all of it (no --case or --model)."""
        if self.request.filtered:
            raise UsageError(f"{what} covers a whole campaign: --case and --model are not allowed here")
        return self.campaign

    # -------------------------------------------------------------- what a build would do

    def _stamping(self, remote: str | None = None) -> stamping.Stamping | None:
        request = self.request
        flags = (request.suite, request.run_profile, request.evaluation_profile)
        return stamping.stamping(request.cwd, flags, self.store_dir, remote)

    @functools.cached_property
    def _stamped(self) -> stamping.Stamped | None:
        """The stamp of the campaign's last plain build and its reads changed since (never with --case/--model)."""
        return None if self.request.filtered else stamping.stamped(self._stamping())

    def fresh(self) -> stamping.Fresh | None:
        """Every node's layer when the stamp of the campaign's last plain build says all are fresh
        (never with --case/--model); None: plan."""
        return stamping.fresh(self._stamped)

    def by_case(self) -> ByCase | None:
        """When only some cases' files changed since the stamp: those cases, to plan alone, the stamp answering for
        the others (builder/casestamp.py); None: plan the whole campaign."""
        found = self._stamped
        if found is None or not found.changed:
            return None
        from clawstore.builder.api import batches_in
        from clawstore.builder.casestamp import split

        answer = split(found.doc, found.changed, self.campaign)
        return None if answer is None or batches_in(self.store) else answer  # (batches: status collects them)

    def inspect(self, force: bool = False, keep: Callable[[NodeState], bool] = lambda s: True,
                by_case: ByCase | None = None) -> Inspection:
        """The states `keep` keeps and why each would execute, planned a window at a time (nothing sent; nothing
        written but a killed build's finished work, adopted first); with `by_case`, of its cases alone, the
        others counted fresh."""
        from clawstore.builder.api import kept_states

        campaign = self.campaign if by_case is None else by_case.campaign
        seen = self._untrusted_seen()
        states, nodes = kept_states(campaign, self.store, force, keep, seen)
        self._say_untrusted(seen)
        nodes += 0 if by_case is None else by_case.fresh_nodes
        return Inspection(campaign.campaign_id, states, never_built_message(self.store, campaign.campaign_id), nodes)

    def dry_run(self, force: bool, from_stamp: bool, remote: str | None = None) -> stamping.Fresh | Inspection:
        """`build --dry-run`: what would execute (`from_stamp`: a matching stamp answers, all fresh; else the
        JSON's plan, which lists every node). `remote`: the build's --remote, refused as the build refuses it (a
        mistyped name, a file where its folder would be), nothing fetched."""
        from clawstore.host.machine_settings import check_build_settings

        check_build_settings(remote=remote is not None)
        if remote is not None:  # (it passed unread: the dry run said what would execute, the build then exit 2)
            from clawstore.remote.config import resolve_remote

            resolve_remote(self.campaign.root, remote)
        found = None if force or not from_stamp else self.fresh()
        if found is not None:
            return found
        from clawstore.builder.engine_ready import engine_refusal, runs_openclaw

        openclaw = False  # an OpenClaw run would execute: the build asks the engine whether it can start them

        def keep(s: NodeState) -> bool:
            nonlocal openclaw
            openclaw = openclaw or runs_openclaw(s.node, s.state == "fresh", force)
            return force or not from_stamp or s.state != "fresh"

        # (the JSON lists every node with its key, which the stamp does not keep: planned in full)
        planned = self.inspect(force, keep, None if force or not from_stamp else self.by_case())
        refused = engine_refusal(self.campaign) if openclaw else None
        if refused is not None:
            self.say(f"warning: the build would be refused (exit 2): {refused}")
        return planned

    def status(self) -> Status:
        """Nodes per model, layer and state, once what provider batches finished is recorded."""
        found = self.fresh()
        if found is not None:
            return Status(found.campaign_id, {m: {k: Counter({"fresh": n}) for k, n in kinds.items()}
                                              for m, kinds in found.layers})
        from clawstore.builder.api import fold_windows  # (here: a status the stamp answers never imports the builder)

        seen = self._untrusted_seen()
        by_case = self.by_case()
        if by_case is not None:
            # Every model's layers come in the order the stamp lists them (its build's first window has them all).
            per_model = {m: {k: Counter({"fresh": n}) for k, n in kinds.items()} for m, kinds in by_case.fresh_layers()}
            planned = fold_windows(by_case.campaign, self.store, False, _fold_status, seen, reasoned=False)
            self._say_untrusted(seen)
            if all(kind in per_model.get(model, {}) for model, kinds in planned.items() for kind in kinds):
                for model, kinds in planned.items():
                    for kind, states in kinds.items():
                        per_model[model][kind].update(states)
                cid = by_case.campaign.campaign_id
                return Status(cid, per_model, never_built_message(self.store, cid, _fresh_runs(per_model)),
                              head_stopped=head_stopped(self.store, cid))
        collected = self.collect()
        cid = self.campaign.campaign_id
        per_model = fold_windows(self.campaign, self.store, False, _fold_status, seen, reasoned=False)
        if by_case is None:  # (said above otherwise: the cases planned alone hold every node the build runs)
            self._say_untrusted(seen)
        pending = sum(len(d.covered) for d in collected.batches if d.campaign_id == cid)
        return Status(cid, per_model, never_built_message(self.store, cid, _fresh_runs(per_model)), pending,
                      collected.recorded, collected.stopped, collected.spent.usd_text() if collected.recorded else None,
                      head_stopped(self.store, cid))

    def _untrusted_seen(self) -> UntrustedSeen | None:
        """What counts, as a plan goes, the nodes the campaign's build would pay for though the store holds their
        results, kept apart from an untrusted import (builder/api.py UntrustedSeen); None when there is none."""
        from clawstore.builder.api import UntrustedSeen

        if self._store is None and not self.exists(self.campaign.root):
            return None  # (nothing imported: the build checks its key and settings before a store is made)
        return UntrustedSeen.of(self.store)

    def _say_untrusted(self, seen: UntrustedSeen | None) -> None:
        note = seen.note() if seen is not None else None
        if note is not None:
            self.say(note)

    def collect(self, wait: bool = False) -> Collected:
        """Record every finished line of the provider batches covering the campaign (with `wait`, until
        none is pending); the batches still in the store after that."""
        from clawstore.builder.batch_collect import collect

        return collect(self.campaign, self.store, wait)

    def explain(self) -> Inspection:
        """The nodes that are not fresh, each with what changed since the last build at its address."""
        found = self.fresh()
        if found is not None:
            return Inspection(found.campaign_id, [], None)
        return self.inspect(keep=lambda s: s.state != "fresh", by_case=self.by_case())

    def plan(self, force: bool = False, max_concurrency: int | None = None, batch: bool = False,
             remote: str | None = None) -> SpendPlan:
        """What a build would send and its estimated cost; with `remote`, once the pull a `build --remote`
        starts with has brought what the remote holds of it. A campaign whose stamp proves it fresh is
        answered from the stamp's layers and its suite and profiles: nothing to send."""
        from clawstore.spend.estimate import plan_spend

        if remote is not None:
            from clawstore.remote.live import pull_before

            pull_before(*self._remote_parts(remote), self.say)
        found = None if force or remote is not None else self._fresh_plan(max_concurrency, batch)
        if found is not None:
            return found  # (fresh: nothing runs, nothing kept apart to say)
        seen = self._untrusted_seen()
        if not force and remote is None:
            found = self._plan_by_case(max_concurrency, batch, seen)
        if found is None:
            found = plan_spend(self.campaign, self.store, force, max_concurrency, batch, seen)
        self._say_untrusted(seen)
        return found

    def _plan_by_case(self, max_concurrency: int | None, batch: bool,
                      seen: UntrustedSeen | None = None) -> SpendPlan | None:
        """`plan` of the cases whose files changed alone, the stamp's nodes of the others added as reused."""
        from clawstore.spend.estimate import plan_by_case

        by_case = self.by_case()
        return None if by_case is None else plan_by_case(by_case, self.store, max_concurrency, batch, seen)

    def _fresh_plan(self, max_concurrency: int | None, batch: bool) -> SpendPlan | None:
        from clawstore.config.campaign import campaign_profiles
        from clawstore.spend.estimate import fresh_plan

        found = self.fresh()
        r = self.request
        profiles = None if found is None else campaign_profiles(r.cwd, r.suite, r.run_profile, r.evaluation_profile)
        if found is None or profiles is None:
            return None
        return fresh_plan(found.campaign_id, found.layers, *profiles, max_concurrency, batch)

    # -------------------------------------------------------------- a build

    def build(self, settings: BuildSettings) -> Built:
        """Build the campaign: reuse what is fresh, execute what is stale (a plain rebuild whose inputs
        did not change is answered from its stamp; with --remote, when the remote did not change either)."""
        from clawstore.host.machine_settings import check_build_settings

        s = settings
        check_build_settings(remote=s.remote is not None)
        plain = not (s.force or self.request.filtered or s.max_cost is not None or s.executor != "local"
                     or s.batch or s.wait)
        found = self._stamping(s.remote) if plain else None
        answer = None if found is None else self._from_stamp(found)
        if answer is not None:
            return answer
        from clawstore.builder.api import build, unbuilt_keys  # (here: a no-op answered above never imports them)
        from clawstore.builder.engine import BuildOptions

        with stamping.recording(found) as reads, self.remote_session(s.remote):
            planned, seen = None, self._untrusted_seen()
            if s.max_cost is not None:
                planned = self._within_budget(s, seen)
            if planned is None and _shows_live(s.progress):
                planned = self._estimate(s, seen)
            options = BuildOptions(force=s.force, max_concurrency=s.max_concurrency,
                                   fixed_concurrency=s.fixed_concurrency, quiet=s.quiet,
                                   max_cost_usd=s.max_cost, progress=s.progress,
                                   planned_cost_usd=None if planned is None else planned.estimated_cost_usd,
                                   planned_cost_minimum=planned is not None and planned.floor,
                                   planned_layers=None if planned is None else planned.layers,
                                   executor=s.executor, ray_address=s.ray_address, batch=s.batch, wait=s.wait,
                                   say=self.say)
            if seen is not None and not seen.planned:  # (no plan made above: one for the note alone)
                seen.count(unbuilt_keys(self.campaign, self.store, failed=True))
            self._say_untrusted(seen)  # (before anything is paid)
            killed, collected = self._killed_at_start(), self._collected_at_start()
            report = build(self.request, self, options)
            killed, notes = _name_killed(self.store, self.campaign.campaign_id, killed, report.build_id,
                                         whole=not self.request.filtered)
            if not self.request.filtered:  # (its head names what a collect recorded before it began: let go)
                from clawstore.builder.batch_collect import let_go_collected

                let_go_collected(self.store, self.campaign.campaign_id, collected)
        self._keep_parsed(self.store)
        if found is not None and reads is not None:
            after = self._stamping(s.remote) if found.remote is not None else None
            stamping.leave_stamp(found, after, reads, report, self.campaign.items.cases)
        return dataclasses.replace(Built.of(report), notes=notes, killed=killed)

    def _killed_at_start(self) -> list[KilledBuild]:
        """The campaign's builds found killed as a build starts. A store not there yet is not made for it (none was
        killed in it): a build refused by its own checks (no key, a key it cannot send) leaves no store."""
        from clawstore.store.buildlogs import journals

        if self._store is None and not journals(resolve_store_dir(self.store_dir, self.campaign.root)):
            return []
        return _killed(self.store, self.campaign.campaign_id)

    def _collected_at_start(self) -> str | None:
        """What the campaign's `collected/` ref names as a build starts (builder/batch_collect.py keep_collected); a
        store not there yet is not made for it."""
        from clawstore.builder.batch_collect import collected_ref

        if self._store is None and not (resolve_store_dir(self.store_dir, self.campaign.root) / "refs").is_dir():
            return None
        return self.store.get_ref(collected_ref(self.campaign.campaign_id))

    def _from_stamp(self, found: stamping.Stamping) -> Built | None:
        from clawstore.builder import stamp
        from clawstore.store.buildlogs import journals
        from clawstore.store.documents import TOKEN_METRICS

        doc = stamping.matching_stamp(found)
        rows = None if doc is None else stamp.rows_of(found.store_root, found.digest, doc)
        if doc is None or rows is None:
            return None
        notes = [] if found.remote is None else [
            f"remote {found.remote.name}: unchanged since the last build with it: nothing to pull or push"]
        build_id = stamp.log_noop(found.store_root, doc)
        killed: list[KilledBuild] = []
        if journals(found.store_root):  # (else none was killed: the store is not opened)
            from clawstore.store.store import Store

            with contextlib.closing(Store(found.store_root, create=False)) as store:
                killed, named = _name_killed(store, doc.campaign_id, _killed(store, doc.campaign_id), build_id)
                notes += named
        return Built(doc.campaign_id, build_id, rows, doc.counts,
                     {**{name: 0 for name in TOKEN_METRICS}, "cost_usd": 0.0},
                     from_stamp=True, notes=notes, killed=killed)

    def _estimate(self, s: BuildSettings, seen: UntrustedSeen | None) -> SpendPlan | None:
        """The plan for the live display (its cost estimate, the nodes each layer expects); none is fine (the display
        then shows spend only, and the layers begun)."""
        from clawstore.spend.estimate import plan_spend

        try:
            return plan_spend(self.campaign, self.store, s.force, s.max_concurrency, s.batch, seen)
        except Exception:  # noqa: BLE001 - an estimate is a nicety; the build reports real errors itself
            return None

    def _within_budget(self, s: BuildSettings, seen: UntrustedSeen | None) -> SpendPlan:
        """The plan, its estimate within --max-cost; else BudgetRefused (with the plan, for the user)."""
        from clawstore.spend.estimate import floor_under_budget, over_budget, plan_spend, unpriced

        assert s.max_cost is not None
        plan = plan_spend(self.campaign, self.store, s.force, s.max_concurrency, s.batch, seen)
        estimate = plan.estimated_cost_usd
        if estimate is not None and estimate <= s.max_cost:
            if plan.floor:  # (a floor under the limit says nothing of the build's spend: the running budget keeps it)
                self.say(floor_under_budget(estimate, s.max_cost))
            return plan
        if estimate is None:
            why = unpriced(self.campaign, plan)
        else:
            why = over_budget(estimate, s.max_cost, plan.floor)
        raise BudgetRefused(plan, why)

    # -------------------------------------------------------------- remotes

    @contextlib.contextmanager
    def remote_session(self, name: str | None) -> Iterator[None]:
        """`--remote NAME`: the build between a pull of what its plan needs and a push (remote/live.py)."""
        if name is None:
            yield
            return
        from clawstore.remote.live import remote_session
        from clawstore.store.buildlogs import pushed_unadopted

        with remote_session(*self._remote_parts(name), say=self.say, unadopted=pushed_unadopted):
            yield

    def _remote_parts(self, name: str) -> tuple[Store, Remote, str, Callable[[], set[str]]]:
        """What the pull before a `--remote NAME` build or plan needs: the store, the remote, the campaign's
        head ref, and the keys the build would execute (remote/live.py, pull_before)."""
        from clawstore.builder.api import unbuilt_keys
        from clawstore.builder.buildlog import head_ref
        from clawstore.remote.config import resolve_remote

        campaign = self.campaign
        target = resolve_remote(campaign.root, name)  # (a bad name or location is refused before a store is made)
        store = self.store
        return store, target, head_ref(campaign.campaign_id), lambda: unbuilt_keys(campaign, store)

    # -------------------------------------------------------------- what keeps the store's content

    def gc(self, grace_s: float, dry_run: bool, listed: bool = True) -> keeping.Collected:
        from clawstore.project import keeping

        return keeping.collect_garbage(self.existing_store, grace_s, dry_run, listed)

    def pin(self, name: str, force: bool) -> tuple[keeping.Pinned, str]:
        """Pin the campaign's head as pins/NAME: the pin, and the campaign's id."""
        from clawstore.project import keeping
        from clawstore.store.refs import check_ref_name

        check_ref_name(keeping.PIN_PREFIX + name)  # (a bad name first, before the configs load)
        campaign = self.whole_campaign("claw pin")
        return keeping.pin(self.store, campaign.campaign_id, name, force), campaign.campaign_id

    def unpin(self, name: str) -> tuple[str, str]:
        from clawstore.project import keeping
        from clawstore.store.refs import check_ref_name

        check_ref_name(keeping.PIN_PREFIX + name)  # (before the store opens)
        return keeping.unpin(self.existing_store, name)

    def refs(self, prefix: str = "") -> dict[str, str]:
        return self.existing_store.list_refs(prefix)

    def delete_refs(self, names: tuple[str, ...]) -> dict[str, str]:
        from clawstore.project import keeping

        return keeping.delete_refs(self.existing_store, names)

    def export(self, output: Path) -> tuple[ArchiveSummary, str, Unbuilt]:
        """Export the campaign into `output`: its summary, the campaign's id, and how many of its nodes are not built
        for its configs as they are now (stale or never built). The archive holds those configs and the results the
        store has, as the workspace does: a build of it elsewhere runs (and pays for) exactly those nodes, as a build
        here would. Results a build here reuses though the head does not name them (what a killed build finished, the
        plan adopts) travel too: before session 74 they were left out, and the build elsewhere paid for them again."""
        from clawstore.project import keeping

        campaign = self.whole_campaign("claw archive export")
        unbuilt = Unbuilt(0, 0)

        def beyond_head(head_actions: Mapping[str, str]) -> dict[str, str]:
            nonlocal unbuilt
            unbuilt, beyond = self._unbuilt_beyond_head(head_actions)
            return beyond

        return keeping.export(self.store, campaign, output, beyond_head), campaign.campaign_id, unbuilt

    def _unbuilt_beyond_head(self, head_actions: Mapping[str, str]) -> tuple[Unbuilt, dict[str, str]]:
        """How many nodes are stale or never built (and of those, pending in a batch of this store's), and the fresh
        nodes' results the head's entries (`head_actions`) do not name (key -> record), planned as `claw explain` plans
        (a stamp proving the campaign fresh answers at once: none)."""
        if self.fresh() is not None:
            return Unbuilt(0, 0), {}
        from clawstore.builder import batch_doc
        from clawstore.builder.api import fold_windows
        from clawstore.store.core.ids import is_oid, oid_hex

        covered = batch_doc.covered_keys(batch_doc.pending(self.store))

        def fold(windows: Iterator[list[NodeState]]) -> tuple[Unbuilt, dict[str, str]]:
            unbuilt, batched, beyond = 0, 0, {}
            for states in windows:
                for s in states:
                    node = s.node
                    if s.state in ("stale", "never-built"):
                        unbuilt += 1
                        batched += is_oid(node.key) and oid_hex(node.key) in covered  # (not a key known later)
                    elif s.state == "fresh" and node.record_id is not None \
                            and head_actions.get(node.key) != node.record_id:
                        beyond[node.key] = node.record_id
            return Unbuilt(unbuilt, batched), beyond

        by_case = self.by_case()
        seen = self._untrusted_seen()
        found = fold_windows(self.campaign if by_case is None else by_case.campaign, self.store, False, fold, seen,
                             reasoned=False)
        self._say_untrusted(seen)
        return found

    def import_archive(self, file: Path, configs_to: Path | None, pins: tuple[str, ...],
                       untrusted: bool) -> keeping.Imported:
        from clawstore.project import keeping

        return keeping.import_archive(file, self.store_dir, configs_to, pins, untrusted)


def _fold_status(windows: Iterator[list[NodeState]]) -> dict[str, dict[str, Counter[str]]]:
    """Nodes per model, layer and state, in the order first met."""
    per_model: dict[str, dict[str, Counter[str]]] = {}
    for states in windows:
        for s in states:
            node = s.node
            kinds = per_model.get(node.address["model_id"])
            if kinds is None:
                kinds = per_model[node.address["model_id"]] = {}
            counts = kinds.get(node.kind)
            if counts is None:  # (a Counter made a layer, not a node)
                counts = kinds[node.kind] = Counter()
            counts[s.state] += 1
    return per_model


def _shows_live(mode: str) -> bool:
    """Will the build show the live display (which wants the plan's cost estimate)?"""
    from clawstore.builder.progress_choice import display_mode

    return display_mode(mode) == "live"
