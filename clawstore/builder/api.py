"""Entry points the project's front calls (clawstore/project/front.py): build and inspect one campaign."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from clawstore.builder.buildlog import head_ref
from clawstore.builder.cyclic_gc import collector_paused
from clawstore.builder.request import CampaignRequest
from clawstore.builder.run_exec import LlmProbeRuns, OpenClawRuns, RunExecutor, Stored, message_doc
from clawstore.errors import StoreError
from clawstore.graph import plan as graph_plan  # (WINDOW_RUNS read as it plans: tests set a smaller one)
from clawstore.graph.explain import HeadByCases, HeadOutOfOrder, classify, read_head, reasons
from clawstore.graph.plan import (
    RELEASED,
    HeadNodes,
    Node,
    address_id,
    attach_records,
    plan_runs,
    require_keys,
    window_items,
)
from clawstore.host.machine_settings import backoff_base
from clawstore.host.scratch import sweep_dead_scratch
from clawstore.store.core.locks import READING_HEAD_LEASE_PREFIX
from clawstore.store.untrusted import promote_trusted

if TYPE_CHECKING:
    from clawstore.builder.clients import ChatClient, OpenClawCluster, ProviderConnection
    from clawstore.builder.engine import BuildOptions, BuildReport
    from clawstore.builder.eval_layer import EvalLayer
    from clawstore.builder.refused import Refusals
    from clawstore.builder.session import BuildSession
    from clawstore.config.campaign import Campaign, CampaignItem
    from clawstore.config.models import ModelConfig
    from clawstore.config.parsed import ParsedCases
    from clawstore.providers import ProviderClient
    from clawstore.providers.client import ChatResult
    from clawstore.providers.endpoint import Endpoint
    from clawstore.runners.openclaw.runner import OpenClawOutcome, OpenClawSpec
    from clawstore.store.store import Store


def load_campaign(request: CampaignRequest, parsed: ParsedCases | None = None) -> Campaign:
    """The campaign the request names (its `warnings` are the caller's to say); `parsed`: config/parsed.py."""
    from clawstore.config import resolve_campaign

    return resolve_campaign(request.cwd, request.suite, request.run_profile, request.evaluation_profile,
                            cases=request.cases, models=request.models, parsed=parsed)


def _endpoint(model: ModelConfig) -> Endpoint:
    from clawstore.providers.endpoint import resolve_endpoint

    return resolve_endpoint(model.model_extra or {}, field=f"models[{model.model_id}]")


def openclaw_reach_warnings(campaign: Campaign) -> list[str]:
    """Each endpoint the campaign's OpenClaw runs would fail at once on (runners/openclaw/loopback.py: a server on
    this machine's loopback, the containers on a network of their own), said before anything is sent: the same check
    the runner makes, on the configs and CLAW_OPENCLAW_NETWORK, the engine not asked. A model whose endpoint is
    malformed is left to the error planning it raises."""
    if campaign.run_profile.openclaw is None or not any(c.runner_type == "openclaw" for c in campaign.items.cases):
        return []
    from clawstore.errors import ConfigError
    from clawstore.runners.openclaw.loopback import ENDPOINT_UNREACHABLE, endpoint_problem, network_setting

    network = network_setting()
    by_problem: dict[str, list[str]] = {}
    for model in campaign.items.models:
        try:
            problem = endpoint_problem(_endpoint(model).base_url, network)
        except ConfigError:
            continue
        if problem is not None:
            by_problem.setdefault(problem, []).append(model.model_id)
    return [f"models {', '.join(ids)}: each OpenClaw run would fail at once ({ENDPOINT_UNREACHABLE}): {problem}"
            for problem, ids in by_problem.items()]


def plan_campaign(campaign: Campaign, store: Store) -> list[Node]:
    """Run nodes of the campaign, each with its key and endpoint."""
    return _plan_runs(campaign, store)[0]


OpenClawSpecs = dict[tuple[str, str], "OpenClawSpec"]  # by (model id, case id)


def _plan_runs(campaign: Campaign, store: Store) -> tuple[list[Node], OpenClawSpecs]:
    """`plan_campaign`, and each openclaw item's spec (its key depends on it; executing it needs it)."""
    planner = _RunPlanner(campaign, store)
    return planner.plan(None), planner.openclaw.specs


class _RunPlanner:
    """Plans run nodes, all of the campaign's or a window's items at a time, each with its key and endpoint (each
    model's endpoint and each openclaw item's spec made once)."""

    def __init__(self, campaign: Campaign, store: Store):
        self.campaign = campaign
        self.endpoints: dict[str, Endpoint] = {}
        self.openclaw = _OpenClawPlanner(campaign, store)
        self.repetitions = campaign.run_profile.execution_policy.run_repetitions

    def plan(self, items: list[CampaignItem] | None) -> list[Node]:
        nodes = plan_runs(self.campaign, self.repetitions, self._endpoint_of, self._runner_identity_of, items,
                          legacy_identity_of=self._legacy_identity_of, earlier_identity_of=self._earlier_identity_of)
        for node in nodes:
            node.endpoint = self.endpoints[node.address["model_id"]]
        return nodes

    def _endpoint_of(self, item: CampaignItem) -> dict[str, Any] | None:
        if item.model.model_id not in self.endpoints:
            self.endpoints[item.model.model_id] = _endpoint(item.model)
        return self.endpoints[item.model.model_id].identity()

    def _runner_identity_of(self, item: CampaignItem) -> dict[str, Any] | None:
        if item.runner_type == "openclaw":
            return self.openclaw.identity(item, self.endpoints[item.model.model_id])
        return None

    def _legacy_identity_of(self, item: CampaignItem) -> dict[str, Any] | None:
        """An openclaw run's identity before its model's prices left it (asked after `_runner_identity_of`)."""
        return self.openclaw.legacy_identity(item) if item.runner_type == "openclaw" else None

    def _earlier_identity_of(self, item: CampaignItem) -> dict[str, Any] | None:
        """An openclaw run's identity before session 77, with its container CLI as written (asked after
        `_runner_identity_of`)."""
        return self.openclaw.earlier_identity(item) if item.runner_type == "openclaw" else None


class _OpenClawPlanner:
    """Builds each openclaw item's spec once: agent template tree, image digest, rendered config."""

    def __init__(self, campaign: Campaign, store: Store):
        self.campaign = campaign
        self.store = store
        self.trees: dict[str, str] = {}
        self.digests: dict[tuple[str, str], str | None] = {}
        self.specs: OpenClawSpecs = {}
        self.engine_checked = False

    def identity(self, item: CampaignItem, endpoint: Endpoint) -> dict[str, Any]:
        from clawstore.runners.openclaw import (
            OpenClawSpec,
            agent_workspace_tree,
            openclaw_identity,
            resolve_image_digest,
        )

        block = self.campaign.run_profile.openclaw
        if not self.engine_checked:  # the machine's settings: a malformed one is refused before any run
            from clawstore.runners.openclaw.container import EngineSettings

            EngineSettings.from_env(block.docker_cli)
            self.engine_checked = True
        agent = self.campaign.agents[item.agent_id]
        if item.agent_id not in self.trees:
            self.trees[item.agent_id] = agent_workspace_tree(self.store, agent.dir, agent.agent)
        image_key = (block.image, block.docker_cli)
        if image_key not in self.digests:
            self.digests[image_key] = resolve_image_digest(block.image, block.docker_cli)
        case = item.case.case
        spec = OpenClawSpec(
            case_id=case.case_id, agent_id=item.agent_id, agent_dir=agent.dir, agent=agent.agent,
            agent_tree=self.trees[item.agent_id], requested_model=item.resolved_model,
            model_extras=dict(item.model.model_extra or {}), image=block.image,
            image_digest=self.digests[image_key], docker_cli=block.docker_cli,
            timeout_seconds=block.timeout_seconds,
            messages=[message_doc(m) for m in item.messages], turns=[message_doc(m) for m in item.turns],
            attachments=[(a.name, a.data) for a in item.attachments],
            hints=dict((case.input.context or {}).get("openclaw") or {}),
            provider_base_url=endpoint.base_url, api_key_env=endpoint.key_env_in_use())
        self.specs[(item.model.model_id, case.case_id)] = spec
        return openclaw_identity(spec)

    def legacy_identity(self, item: CampaignItem) -> dict[str, Any] | None:
        from clawstore.runners.openclaw import openclaw_legacy_identity

        return openclaw_legacy_identity(self.specs[(item.model.model_id, item.case.case.case_id)])

    def earlier_identity(self, item: CampaignItem) -> dict[str, Any] | None:
        from clawstore.runners.openclaw import openclaw_earlier_identity

        return openclaw_earlier_identity(self.specs[(item.model.model_id, item.case.case.case_id)])


class StoreOpener(Protocol):
    """Opens the campaign's store once the configs are known to be good (`root`: the workspace root).

    `exists` tells whether opening would create it: nothing is created by a command that fails first.
    """

    def exists(self, root: Path) -> bool: ...

    def open(self, root: Path) -> Store: ...


class CampaignSource(StoreOpener, Protocol):
    """The store opener that also holds the request's campaign, loaded once when first asked for
    (clawstore/project/front.py, `Project`)."""

    @property
    def campaign(self) -> Campaign: ...


def build(request: CampaignRequest, source: CampaignSource, options: BuildOptions) -> BuildReport:
    """Build the campaign of `source` (asked for once the Ray client warms up, which overlaps loading it)."""
    with collector_paused():
        return _build(request, source, options)


def _require_every_key(campaign: Campaign) -> None:
    """With no store yet every node executes: every endpoint's key must be there before one is made."""
    from clawstore.providers.endpoint import resolve_endpoint

    for model in campaign.items.models if campaign.items else ():  # (an endpoint is the model's)
        _endpoint(model).api_key()
    if campaign.evaluation_profile is not None:
        for judge in campaign.evaluation_profile.judges:
            resolve_endpoint(judge.model_extra or {}, field=f"judges[{judge.judge_id}]").api_key()


def _require_engine(campaign: Campaign) -> None:
    """With no store yet every OpenClaw run executes: the engine must be able to start them before one is made."""
    from clawstore.builder.engine_ready import engine_refusal, has_openclaw

    refused = engine_refusal(campaign) if has_openclaw(campaign) else None
    if refused is not None:
        raise refused


def _build(request: CampaignRequest, source: CampaignSource, options: BuildOptions) -> BuildReport:
    client = _client(options)
    if options.executor == "ray":
        # Connecting and starting the actors (~0.7 s on a new cluster, one step after the other)
        # overlaps loading the configs and planning. A bad config waits for it, then says so.
        client.warm_up()
    try:
        campaign = source.campaign
        if not source.exists(campaign.root) and campaign.items:
            _require_every_key(campaign)
            _require_engine(campaign)
        store = source.open(campaign.root)
        store.adopt_orphans()  # what a killed build finished is reused, never paid for again
        sweep_dead_scratch()  # what a killed build's runs left in the temp directory (up to a GiB a run)
        promote_trusted(store)  # imports kept apart whose signer the user has trusted since
        # A lease before the first store read: a gc running meanwhile keeps every record this plan may
        # reuse from the action cache (see clawstore/store/services/gc.py); run_build takes its own lease later.
        with store.lease(f"plan {campaign.campaign_id}"):
            return _build_planned(request, store, options, campaign, client)
    finally:
        client.close()


def _build_planned(request: CampaignRequest, store: Store, options: BuildOptions, campaign: Campaign,
                   client: _LazyClient) -> BuildReport:
    # The head a window's cases at a time (graph/explain.py HeadByCases): a build holds a window's head nodes, and
    # the head's advance streams the previous head from the store (builder/buildlog.py `_previous`). Its parts are
    # read to the end of the build: a lease keeps them from a gc after another build moved the ref away.
    head = HeadByCases(store, head_ref(campaign.campaign_id))
    if head.head_id is None:
        return _build_windowed(request, store, options, campaign, client, head)
    with store.lease(READING_HEAD_LEASE_PREFIX + head.head_id):
        return _build_windowed(request, store, options, campaign, client, head)


def _build_windowed(request: CampaignRequest, store: Store, options: BuildOptions, campaign: Campaign,
                    client: _LazyClient, head: HeadByCases) -> BuildReport:
    from clawstore.builder import engine  # (here: a command that only plans never imports what executes, ~50 ms)
    from clawstore.builder.engine_ready import EngineCheck

    planner = _RunPlanner(campaign, store)
    engine_check = EngineCheck(campaign, options.force)
    batches = _run_batches(store, options, client)
    # Provider batches keep the whole plan in one window: a batch per window (and, with --wait, a wait per window)
    # would multiply what a batch is for.
    whole = batches is not None or options.batch or _batch_judges(campaign) or batches_in(store)
    eval_layer = None
    if campaign.evaluation_profile is not None:
        from clawstore.builder.eval_layer import EvalLayer

        eval_layer = EvalLayer(campaign, store, client)

    def windows() -> Iterator[list[Node]]:
        for items in window_items(campaign, WHOLE if whole else graph_plan.WINDOW_RUNS, planner.repetitions):
            previous = head.window(sorted({item.case_id for item in items}), fall_back=True)
            if eval_layer is not None:  # (its checks and judgements now, its results during the next window)
                eval_layer.add_head(previous, head.whole)
            nodes = planner.plan(items)
            attach_records(nodes, store, previous)
            del previous
            require_keys(nodes, options.force)  # (a window's runs: a key missing fails before they are sent)
            engine_check.require(nodes)  # (and an engine that cannot start its OpenClaw runs: builder/engine_ready.py)
            if options.executor == "ray" and (options.force or any(not node.fresh for node in nodes)):
                client.connect()  # a clear error now if the cluster is unreachable; its actors start meanwhile
            yield nodes
        # Every node of the head typed, as when it was read whole: the advance merges the head's nodes of cases no
        # window asked for too (one line for a damaged one, not a failure while the head is written).
        head.finish(fall_back=True)

    runners: dict[str, RunExecutor] = {
        "llm_probe": LlmProbeRuns(store, client, keep_artifacts=eval_layer is not None),
        "openclaw": OpenClawRuns(planner.openclaw.specs, store, client if options.executor == "ray" else None,
                                 client.refusals)}

    def run_work(node: Node, build_id: str) -> Stored:
        return runners[node.item.runner_type].execute(node, build_id)

    options.filtered = request.filtered
    if request.filtered:  # what the filter selected, by id (the flags may name paths)
        options.filter = {"cases": sorted(campaign.case_ids) if request.cases else [],
                          "models": sorted(campaign.model_ids) if request.models else []}
    return engine.run_build(campaign, store, options, windows=windows(), run_work=run_work, eval_layer=eval_layer,
                            run_batches=batches, planned_from=head.head_id, refusals=client.refusals)


def batches_in(store: Store) -> bool:
    """Does the store hold provider batches not collected yet (a build collects them, whatever its flags)?"""
    from clawstore.builder.batch_doc import REF_PREFIX

    return bool(store.list_refs(REF_PREFIX))


def _batch_judges(campaign: Campaign) -> bool:
    """Does a judge of the campaign send its judgements by provider batch (`batch: true`: builder/eval_layer.py)?"""
    profile = campaign.evaluation_profile
    return profile is not None and any((j.model_extra or {}).get("batch") is True for j in profile.judges)


def _run_batches(store: Store, options: BuildOptions, client: ChatClient
                 ) -> Callable[[BuildSession, list[Node]], set[int]] | None:
    """With --batch, or batches of runs in the store: the build's batch pass over its stale runs."""
    from clawstore.builder.batch_doc import REF_PREFIX

    if options.executor != "local" or not (options.batch or store.list_refs(REF_PREFIX)):
        return None
    from clawstore.builder.run_batch import batch_runs

    def run_batches(session: BuildSession, stale: list[Node]) -> set[int]:
        return batch_runs(session, stale, client)

    return run_batches


def _client(options: BuildOptions) -> _LazyClient:
    """The in-process client, or the Ray cluster's (`--executor ray`), connected only when needed."""
    backoff = backoff_base()
    if options.executor == "ray":
        from clawstore.builder.ray_client import RayClient, import_ray

        # Imported here, not while warming up: importing is CPU work that would only slow loading the
        # configs beside it (one interpreter lock); connecting is mostly waiting, which overlaps it.
        import_ray()
        return _LazyClient(lambda: RayClient(options.ray_address))
    return _LazyClient(lambda: _provider_client(backoff))


class _LazyClient:
    """One provider client (one connection pool) per build, created only if something calls out."""

    def __init__(self, make: Callable[[], ProviderConnection], refusals: Refusals | None = None) -> None:
        from clawstore.builder.refused import Refusals

        self._make = make
        # endpoints out of credit: no further request goes to them (builder/refused.py; an empty one is falsy)
        self.refusals = refusals if refusals is not None else Refusals()
        self._client: ProviderConnection | None = None
        self._error: Exception | None = None  # what creating it in the background raised
        self._warming: threading.Thread | None = None
        self._lock = threading.Lock()

    def _get(self) -> ProviderConnection:
        made = self._client  # once made it never changes: a request takes it without the lock 16 workers share
        if made is not None:
            return made
        with self._lock:  # held while making it: callers wait for a warm-up under way
            if self._error is not None:
                raise self._error
            if self._client is None:
                self._client = self._make()
            return self._client

    def warm_up(self) -> None:
        """Start creating the client in a background thread; the first caller gets it or its error."""
        self._warming = threading.Thread(target=self._warm, name="claw-client-warm-up", daemon=True)
        self._warming.start()

    def _warm(self) -> None:
        try:
            self._get()
        except Exception as exc:  # noqa: BLE001 - handed to the first caller, who reports it
            self._error = exc

    def chat(self, endpoint: Endpoint, body: dict[str, Any], timeout: float | None = None,
             retries: int = 5) -> ChatResult:
        self.refusals.check(endpoint)
        try:
            return self._get().chat(endpoint, body, timeout=timeout, retries=retries)
        except Exception as exc:
            self.refusals.note(endpoint, exc)
            raise

    def run_openclaw(self, spec: OpenClawSpec, objects: dict[str, bytes]) -> tuple[OpenClawOutcome, dict[str, bytes]]:
        cluster = cast("OpenClawCluster", self._get())  # only the Ray client is asked (--executor ray)
        return cluster.run_openclaw(spec, objects)

    def connect(self) -> None:
        """Create the client now instead of at the first request."""
        self._get()

    def close(self) -> None:
        if self._warming is not None:
            self._warming.join()  # a client still being made would outlive the build otherwise
        if self._client is not None:
            self._client.close()


def _provider_client(backoff_base: float) -> ProviderClient:
    from clawstore.providers import ProviderClient

    return ProviderClient(backoff_base=backoff_base)


@dataclass
class NodeState:
    node: Node
    state: str  # fresh | stale | failed | never-built
    reasons: list[str]


def inspect_campaign(campaign: Campaign, store: Store, force: bool = False) -> tuple[str, list[NodeState]]:
    """Every node's state and why it would execute (no provider call; nothing written but a killed build's
    finished work, adopted first: store/core/adopt.py), the campaign planned in one window."""
    return campaign.campaign_id, [s for states in inspect_windows(campaign, store, force, WHOLE, whole_head=True)
                                  for s in states]


WHOLE = 1 << 62  # runs a window: the whole campaign in one

T = TypeVar("T")


def fold_windows(campaign: Campaign, store: Store, force: bool, fold: Callable[[Iterator[list[NodeState]]], T],
                 seen: UntrustedSeen | None = None, reasoned: bool = True) -> T:
    """`fold` of inspect_windows; again from the start with the head read whole when its nodes are out of order
    (nothing `fold` made of the windows before is kept). `seen`: counts this plan's nodes kept apart (its count
    before is dropped: what it says is of the last plan). `reasoned`: see inspect_windows."""
    def windows(whole_head: bool) -> Iterator[list[NodeState]]:
        if seen is not None:
            seen.signers.clear()
        for states in inspect_windows(campaign, store, force, whole_head=whole_head, reasoned=reasoned):
            if seen is not None:
                seen.see(states)
            yield states
        if seen is not None:
            seen.planned = True

    try:
        return fold(windows(False))
    except HeadOutOfOrder:
        return fold(windows(True))


def kept_states(campaign: Campaign, store: Store, force: bool, keep: Callable[[NodeState], bool],
                seen: UntrustedSeen | None = None) -> tuple[Iterator[NodeState], int]:
    """The states `keep` keeps in the whole campaign's order, planned a window at a time and kept in a file meanwhile
    (builder/inorder.py: iterable once; each node only as the commands print it: kind, address, key), and how many
    nodes the campaign has."""
    from clawstore.builder.inorder import InOrder

    def fold(windows: Iterator[list[NodeState]]) -> tuple[InOrder, int]:
        kept, nodes = InOrder(campaign.model_ids), 0
        for states in windows:
            nodes += len(states)
            for s in states:
                if keep(s):
                    n = s.node
                    kept.add(n.kind, n.address["model_id"], (n.kind, n.address, n.key, s.state, s.reasons))
            kept.end_window()
        return kept, nodes

    kept, nodes = fold_windows(campaign, store, force, fold, seen)
    return (NodeState(Node(kind, address, RELEASED, key), state, why) for kind, address, key, state, why in kept), nodes


def inspect_windows(campaign: Campaign, store: Store, force: bool = False, runs: int | None = None,
                    whole_head: bool = False, reasoned: bool = True) -> Iterator[list[NodeState]]:
    """inspect_campaign a window of about `runs` (default: a build's) runs at a time, as a build plans
    (graph/plan.py `window_items`): each window's run states, then its evaluation nodes' in the order of their
    runs. A window holds whole cases in case order, every model of each, so the whole campaign's order (models,
    then cases; runs before evaluations) is the windows' states taken section by section, model by model, window
    by window (builder/inorder.py). The head is read a window's cases at a time too (graph/explain.py
    `HeadByCases`: HeadOutOfOrder, unless `whole_head`, when its nodes are not in case order). Without `reasoned`,
    each state's reasons are left empty (`claw status` and `claw plan` print none): a stale node's are a diff of its
    input document against its last build's, read from the store (most of a stale campaign's plan)."""
    with collector_paused():
        with contextlib.suppress(OSError, StoreError):  # (a store this user cannot write is read as it is)
            store.adopt_orphans()
        ref = head_ref(campaign.campaign_id)
        # The head read under a lease naming it: a build beside moving the ref on, then a gc, would delete it mid-read
        # (tests/gc/test_head_readers.py).
        with store.reading_ref(ref) as head_id:
            head = HeadByCases(store, ref, whole_head, lazy=True, head_id=head_id)  # (a record_doc when asked)
            planner = _RunPlanner(campaign, store)
            layer = None
            if campaign.evaluation_profile is not None:
                from clawstore.builder.eval_layer import EvalLayer

                layer = EvalLayer(campaign, store)
            for items in window_items(campaign, graph_plan.WINDOW_RUNS if runs is None else runs, planner.repetitions):
                cases = sorted({item.case_id for item in items})
                previous = head.window(cases)
                nodes = planner.plan(items)
                attach_records(nodes, store, previous)
                pending: dict[str, str] = {}
                if layer is not None:
                    layer.add_head(previous, head.whole)
                    nodes += _eval_nodes(layer, nodes, pending, previous)
                    layer.forget_cases(cases)  # (no later window has them)
                yield _states(nodes, pending, previous, store, force, reasoned)
            head.finish()


def unbuilt_keys(campaign: Campaign, store: Store, failed: bool = False) -> set[str]:
    """The action keys a build of `campaign` would execute, as far as `store` tells them now: those of
    the nodes it can plan (every run, and each check, judgement and result whose inputs are stored: the
    others have no key yet) with no record here to reuse (no entry, or what the entry names is gone);
    `failed`: and those whose record here is a failure, executed again (a pull asks the remote for none of them)."""
    with collector_paused():
        nodes, pending, _ = _plan_all(campaign, store)
    return {node.key for node in nodes
            if node.key not in pending and (node.record is None or failed and not node.fresh)}


class UntrustedSeen:
    """The nodes a plan would execute (any not fresh) whose results the store keeps apart from an untrusted import
    (store/untrusted.py), counted by signer as the plan's windows go by (fold_windows): the build would pay for them
    again without a word otherwise. Counted by the plan a command makes anyway, the note costs no plan of its own
    (a build that makes none counts `unbuilt_keys`)."""

    def __init__(self, kept: dict[str, str]):
        self.kept = kept  # {action key: its signer} (store/untrusted.py untrusted_results)
        self.signers: Counter[str] = Counter()
        self.planned = False  # a whole plan was counted

    def count(self, keys: Iterable[str]) -> None:
        """Count these keys, a whole plan's (`unbuilt_keys`), in place of what a plan cut short counted."""
        kept = self.kept
        self.signers = Counter(kept[key] for key in keys if key in kept)
        self.planned = True

    @classmethod
    def of(cls, store: Store) -> UntrustedSeen | None:
        """None when nothing is kept apart (the usual store: the untrusted refs' names read, nothing planned)."""
        from clawstore.store.untrusted import untrusted_results

        kept = untrusted_results(store)
        return cls(kept) if kept else None

    def see(self, states: list[NodeState]) -> None:
        kept = self.kept
        self.signers.update(kept[s.node.key] for s in states if s.state != "fresh" and s.node.key in kept)

    def note(self) -> str | None:
        signers = self.signers
        if not signers:
            return None
        whose = ", ".join(sorted(signers))
        ways = "; ".join(f"claw trust add {s}" for s in sorted(signers) if s != "unsigned") or "none: not signed"
        return (f"claw: note: {signers.total()} nodes this build runs (and pays for) have results in the store "
                f"imported --untrusted from {whose}, kept apart and not reused; to reuse them, trust the signer "
                f"first: {ways}")


def _plan_all(campaign: Campaign, store: Store) -> tuple[list[Node], dict[str, str], HeadNodes]:
    """Every node as far as the store lets it be planned, the placeholders' reasons (by key), the head."""
    nodes = plan_campaign(campaign, store)
    _, previous = read_head(store, head_ref(campaign.campaign_id))
    attach_records(nodes, store, previous)
    all_nodes = list(nodes)
    pending: dict[str, str] = {}
    if campaign.evaluation_profile is not None:
        from clawstore.builder.eval_layer import EvalLayer

        all_nodes += _eval_nodes(EvalLayer(campaign, store, head=previous), nodes, pending, previous)
    return all_nodes, pending, previous


def _states(nodes: list[Node], pending: dict[str, str], previous: HeadNodes, store: Store,
            force: bool, reasoned: bool = True) -> list[NodeState]:
    states = []
    for node in nodes:
        before = previous.get(address_id(node.kind, node.address))
        if node.key in pending:
            state = "stale" if before is not None else "never-built"
            states.append(NodeState(node, state, [pending[node.key]] if reasoned else []))
            continue
        states.append(NodeState(node, classify(node, before),
                                reasons(node, before, store, force) if reasoned else []))
    return states


def _unbuilt(run: Node, head: HeadNodes) -> str:
    """Why a run has no record yet: never built, or built in an older version (its inputs changed since)."""
    if head.get(address_id("run", run.address)) is None:
        return "the run has never been built"
    return "the run was built, but its inputs changed since: it runs again first"


def _eval_nodes(layer: EvalLayer, runs: list[Node], pending: dict[str, str], head: HeadNodes) -> list[Node]:
    """Evaluation nodes as far as they can be planned from what is stored; the rest are pending.

    A node whose inputs a build has yet to make (a stale run's checks, judgements and result) has no
    key yet: it stands in as a placeholder, so dry-run and status count every node the build would run.
    """
    found: list[Node] = []

    def placeholder(kind: str, address: dict[str, Any], why: str) -> None:
        node = Node(kind, address, {}, f"pending:{address_id(kind, address)}")
        pending[node.key] = why
        found.append(node)

    def judges_pending(run: Node, why: str) -> None:
        for judge_run, rep in layer.judge_plan:
            placeholder("judge", {**run.address, "judge_run_id": judge_run.judge_run_id,
                                  "judge_repetition": rep}, why)

    for run in runs:
        ev = layer.start(run)
        if ev.checks is None:
            why = f"waits for its run ({_unbuilt(run, head) if run.record is None else ev.blocked})"
            placeholder("checks", dict(run.address), why)
            judges_pending(run, why)
            placeholder("result", dict(run.address), why)
            continue
        found.append(ev.checks)
        layer.plan_judges(ev)
        if not ev.judges:
            judges_pending(run, "waits for its checks")
        found += ev.judges
        layer.plan_result(ev)
        if ev.result is not None:
            found.append(ev.result)
        else:
            placeholder("result", dict(run.address), "waits for its checks and judgements")
    return found
