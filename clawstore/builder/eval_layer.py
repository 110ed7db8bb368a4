"""The evaluation layers of a build: checks → judge (per judge run × repetition) → result, per run.

Each is a node with its own key (graph/keys.py), so editing a rubric re-judges without re-running,
changing the aggregation costs no provider call, and a failed judge is retried next build.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from clawstore.builder.execute import execute_nodes, partition
from clawstore.builder.lanes import Lane
from clawstore.builder.legacy_keys import record_under_key_now, record_under_legacy_key
from clawstore.builder.tree_files import TreeSandboxFiles, TreeWorkspaceFiles
from clawstore.builder.unstored import Stored, store_answer
from clawstore.graph.keys import (
    HOOK_FAULTS_S75,
    JUDGE_FIELDS_NOT_IN_KEY,
    JUDGE_FIELDS_NOT_IN_KEY_75,
    checks_document,
    document_key,
    judge_document,
    keyed_document,
    object_id,
    result_document,
)
from clawstore.graph.plan import HeadNodes, Node, address_id, attach_record, put_input
from clawstore.graph.records import make_record
from clawstore.providers.usage import counts_alone_unknown, stored_tokens
from clawstore.runners.pricing import record_cost, with_known_part
from clawstore.store.documents import TOKEN_METRICS
from clawstore.values import jsontext
from clawstore.values.canonical import canonical_json, field_values
from clawstore.values.clock import utc_now
from clawstore.values.costs import CostSum
from clawstore.values.prompt_cut import is_dense_warning

if TYPE_CHECKING:
    from clawstore.builder.clients import ChatClient
    from clawstore.builder.session import BuildSession
    from clawstore.config.campaign import Campaign, CampaignItem
    from clawstore.config.models import JudgeConfig
    from clawstore.evaluate.inputs import FolderCache
    from clawstore.evaluate.judge import JudgeIteration
    from clawstore.providers.client import ChatResult
    from clawstore.providers.endpoint import Endpoint
    from clawstore.store.store import Store

NodeWork = Callable[[Node, str], Stored]  # executes a node for a build (its id), returns its record
Earlier = Callable[[], list[tuple[str, dict[str, Any], bytes]]]  # a node's keys, documents and bytes before

JUDGE_TIMEOUT_S = 120.0
JUDGE_RETRIES = 3


def judge_metrics(usage: dict[str, Any], latency_s: float) -> dict[str, Any]:
    """A judgement record's metrics from a judge repetition's summed usage."""
    # (a reply's usage not believed, or one that counted no tokens beside the cost it reported: unknown, never 0)
    known = not (usage.get("usage_rejected") or usage.get("tokens_unknown"))
    return {**stored_tokens(usage, TOKEN_METRICS, known), "cost_usd": usage.get("cost_usd"),
            "latency_s": round(latency_s, 6)}


@dataclass
class RunEvaluation:
    """The evaluation nodes hanging off one run node."""

    run: Node
    checks: Node | None = None
    judges: list[Node] = field(default_factory=list)
    result: Node | None = None
    blocked: str | None = None
    expected_judges: int = 0
    pending: str | None = None  # judgements a provider batch still stands for (builder/batching.py)

    @property
    def run_address(self) -> tuple[str, str, int]:
        a = self.run.address
        return (a["model_id"], a["case_id"], a["repetition"])

    def nodes(self) -> list[Node]:
        return [n for n in (self.checks, *self.judges, self.result) if n is not None]

    @property
    def ok(self) -> bool:
        result, checks = self.result, self.checks
        # (checks whose record is not reusable, a hook not run, without a result or stopped at its timeout, run again
        # next build: not done either, so the build exits 1 and leaves no stamp)
        return (self.blocked is None and result is not None and result.record is not None
                and result.record.get("status") == "success" and bool(result.record.get("cacheable"))
                and checks is not None and checks.record is not None and bool(checks.record.get("cacheable")))

    def action(self) -> str:
        if self.pending:
            return "pending"
        nodes = self.nodes()
        if self.blocked or not self.ok or any(n.action in ("fail", "skip") for n in nodes):
            return "fail"
        return "exec" if any(n.action == "exec" for n in nodes) else "reuse"

    def row(self) -> dict[str, Any]:
        record = (self.result.record if self.result else None) or {}
        summary = record.get("summary") or {}
        cost = CostSum.total(CostSum.of_metrics(n.record.get("metrics")) for n in self.judges if n.record).shown
        return {"eval": self.action(), "score": summary.get("final_score"), "passed": summary.get("passed"),
                "eval_status": record.get("status") or "blocked", "eval_cost_usd": cost,
                "eval_error": self.blocked}


def _batch_judge(judge: JudgeConfig) -> bool:
    """A judge whose entry says `batch: true` (a judges[] extra key, like `pricing`): its judgements
    go to the provider's Batch API without --batch."""
    return (judge.model_extra or {}).get("batch") is True


def _declarative(checks: Node) -> bool:
    """A checks node with no Python hook (a hook is a subprocess, up to its timeout): cheap enough to run inline."""
    return all(c.python_hook is None for c in checks.run.item.case.case.deterministic_checks)


def hook_fault(checks: list[dict[str, Any]]) -> tuple[str, dict[str, str]] | None:
    """(status, error) of checks a python hook of which says what the machine was like, not what the run did: not run
    (bubblewrap not working here, or failing once its probe passed: `failed`, as a harness's own fault is), its process
    gone without a result (killed by a signal, the kernel's OOM killer's: `failed`) or stopped at its timeout (a loaded
    machine: `timed_out`). Their record is kept with that outcome (the judge sees it) but not reusable: the next build
    runs the checks again (docs/building.md, "Outcomes and faults"; before session 75 a hook not run or timed out was
    kept for ever, before session 76 one without a result). None otherwise."""
    faults: dict[str, list[str]] = {"not_run": [], "no_result": [], "timed_out": []}
    for check in checks:
        metadata = check.get("metadata") or {}
        if check.get("outcome") == "error" and check.get("kind") == "python_hook":
            for fault, ids in faults.items():
                if metadata.get(fault) is True:
                    ids.append(str(check.get("check_id")))
    again = "the next build runs the checks again"
    if faults["not_run"]:
        message = next(str(c.get("message")) for c in checks if (c.get("metadata") or {}).get("not_run") is True)
        return "failed", {"code": "hook_not_run", "message": f"{message} (check {', '.join(faults['not_run'])}); "
                                                            + again}
    if faults["no_result"]:
        message = next(str(c.get("message")) for c in checks if (c.get("metadata") or {}).get("no_result") is True)
        return "failed", {"code": "hook_no_result", "message": f"{message} (check {', '.join(faults['no_result'])}); "
                                                              + again}
    if faults["timed_out"]:
        return "timed_out", {"code": "hook_timed_out", "message": f"{len(faults['timed_out'])} hook(s) stopped at the "
                             f"timeout (check {', '.join(faults['timed_out'])}); " + again}
    return None


def _earlier(document: Callable[..., dict[str, Any]], parts: list[tuple[str, dict[str, Any]]]) -> Earlier:
    """A judgement's keys, documents and bytes as they were in session 75 and before it, newest first (`parts`: the
    case's target's id and the judge's part now, then in each of those), made when asked: each once, none the key
    now."""

    def earlier() -> list[tuple[str, dict[str, Any], bytes]]:
        made: list[tuple[str, dict[str, Any], bytes]] = []
        for i, (target, judge) in enumerate(parts[1:], 1):
            if (target, judge) not in parts[:i]:  # (the same document as a newer one: the same key)
                doc = document(target=target, judge=judge)
                key, data = keyed_document(doc)
                made.append((key, doc, data))
        return made

    return earlier


def _checks_s75(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], bytes]]:
    """The key, document and bytes checks with a python hook had in sessions 75 to 76 (keys.py HOOK_FAULTS_S75)."""
    made = {**doc, "hook_faults": HOOK_FAULTS_S75}
    key, data = keyed_document(made)
    return [(key, made, data)]


def _kept_no_result(record: dict[str, Any]) -> bool:
    """A checks record of sessions 75 to 76 keeps a hook process that gave no result (killed by a signal, bubblewrap
    failing once its probe passed): what its message said then (evaluate/hooks.py `_no_result`, which marks it now)."""
    return any(c.get("kind") == "python_hook" and c.get("outcome") == "error"
               and str(c.get("message")).startswith("hook process exited with code ")
               and str(c.get("message")).endswith(" without a result")
               for c in (record.get("summary") or {}).get("checks") or [])


def _not_found(node: Node) -> None:
    """`node` as when no record is found for it: keyed as now, to execute (the one under its earlier key not reused)."""
    assert node.keyed_now is not None
    node.key, node.document, node.document_bytes = node.keyed_now
    node.record_id = node.record = node.unseen = node.keyed_now = None


def _addresses(run: Node, judge_plan: list[tuple[str, int]]) -> set[str]:
    base = dict(run.address)
    found = {address_id("checks", base), address_id("result", base)}
    for judge_run_id, rep in judge_plan:
        found.add(address_id("judge", {**base, "judge_run_id": judge_run_id, "judge_repetition": rep}))
    return found


class EvalLayer:
    def __init__(self, campaign: Campaign, store: Store, client: ChatClient | None = None,
                 head: HeadNodes | None = None):
        from clawstore.evaluate import (
            CHECKS_FORMAT_VERSION,
            JUDGE_PROMPT_FORMAT_VERSION,
            default_judge_system_prompt,
        )

        assert campaign.evaluation_profile is not None, "a campaign with an evaluation profile"
        self.campaign = campaign
        self.store = store
        self.client = client
        self.head = head or {}
        self._head_whole = head is not None  # (given whole: kept as it is, never dropped by case)
        self._head_windows: list[HeadNodes] = []  # (add_head's: the windows not concluded, oldest first)
        self.profile = campaign.evaluation_profile
        self.policy = self.profile.security_policy.model_dump(mode="json")
        self.system_prompt = campaign.judge_system_prompt or default_judge_system_prompt()
        self.system_prompt_id = object_id(self.system_prompt.encode("utf-8"))
        anchors = self.profile.anchors
        self.anchors = ([r.model_dump(mode="json") for r in anchors.references] if anchors.enabled else None)
        self.judges = {j.judge_id: j for j in self.profile.judges}
        self.judge_plan = [(jr, rep) for jr in self.profile.judge_runs for rep in range(jr.repetitions)]
        self.aggregation = self.profile.aggregation.model_dump(mode="json")
        self.sample_size = {jr.judge_run_id: jr.sample_size for jr in self.profile.judge_runs}
        self.checks_format = CHECKS_FORMAT_VERSION
        self.prompt_format = JUDGE_PROMPT_FORMAT_VERSION
        self._case_cache: dict[str, dict[str, Any]] = {}
        self._hook_folders: FolderCache = {}  # (import_path hooks' folders outside their case: listed once per build)
        self._judge_docs: dict[str, tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]] = {}
        self._endpoints: dict[str, Endpoint] = {}
        self._prompt_stored = False  # the judge system prompt's object is durable in the store (put by this build)
        self._artifact_readers: dict[Node, set[int]] = {}  # run → judgements yet to read its kept artifact

    # ---- per-case and per-judge inputs (computed once) ----
    def _case(self, item: CampaignItem) -> dict[str, Any]:
        case_id = item.case.case.case_id
        if case_id not in self._case_cache:
            from clawstore.evaluate import JudgeTarget, check_inputs

            case = item.case.case
            checks = [c.model_dump(mode="json", exclude_none=True) for c in case.deterministic_checks]
            messages = [m for m in item.messages if not (m.metadata and "attachment" in m.metadata)]
            given = JudgeTarget.from_case(case, messages=messages, turns=item.turns,
                                          attachments=[a.name for a in item.attachments])
            # (a rubric the prompt shows nothing of is in no key since session 75, its unshown whitespace since 76)
            target_75 = given.shown_before_76()
            target = target_75.shown()
            target_doc = field_values(target)  # plain JSON values made for it: no deep copy (asdict's)
            target_id = document_key(target_doc)
            self._case_cache[case_id] = {
                "checks": checks,
                "host_inputs": check_inputs(case.deterministic_checks, str(item.case.path.parent),
                                            folders=self._hook_folders),
                "python_hooks": any(c.python_hook is not None for c in case.deterministic_checks),
                "target": target,
                "target_doc": target_doc,
                "target_id": target_id,
                # the target's id in its judgements' keys in session 75 and before it (Node.legacy: before it, and
                # Node.earlier)
                "target_75": target_id if target is target_75 else document_key(field_values(target_75)),
                "target_before": target_id if target is given else document_key(field_values(given)),
                "subdocuments": {target_id: target_doc},  # what `explain` expands the target by
            }
        return self._case_cache[case_id]

    def forget_cases(self, case_ids: Iterable[str]) -> None:
        """Drop what was computed for these cases, and their head nodes unless the head is held whole (a windowed
        build is done with them: builder/engine.py)."""
        cases = set(case_ids)
        for case_id in cases:
            self._case_cache.pop(case_id, None)
        if self._head_whole or not self._head_windows:
            return
        # A window holds whole cases: a window's dict is dropped when the case of one of its nodes is (a dict of no
        # node, at once), never filtered node by node.
        self._head_windows = [nodes for nodes in self._head_windows
                              if nodes and str(next(iter(nodes.values())).address.get("case_id")) not in cases]
        self._merge_head()

    def _merge_head(self) -> None:
        if len(self._head_windows) == 1:
            self.head = self._head_windows[0]
            return
        self.head = {}
        for nodes in self._head_windows:
            self.head.update(nodes)

    def add_head(self, nodes: HeadNodes, whole: bool = False) -> None:
        """A window's nodes of the campaign head, beside those of the windows not concluded yet (a build plans a
        window's results during the next one); `whole`: the whole head, held as it is from then on. The dicts given
        are never changed (they are the caller's)."""
        if whole:
            self.head, self._head_whole, self._head_windows = nodes, True, []
        elif not self._head_whole:
            self._head_windows.append(nodes)
            self._merge_head()

    def _endpoint(self, judge: JudgeConfig) -> Endpoint:
        if judge.judge_id not in self._endpoints:
            from clawstore.providers.endpoint import resolve_endpoint

            self._endpoints[judge.judge_id] = resolve_endpoint(judge.model_extra or {},
                                                               field=f"judges[{judge.judge_id}]")
        return self._endpoints[judge.judge_id]

    def _judge_doc(self, judge: JudgeConfig) -> dict[str, Any]:
        """The judge's part of its judgements' documents."""
        return self._judge_parts(judge)[0]

    def _judge_parts(self, judge: JudgeConfig) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any],
                                                          dict[str, Any]]:
        """The judge's part of its judgements' documents now; before session 58 (`cost` and the harness settings in
        it: graph/plan.py Node.legacy), None when the judge declares no `cost`; in session 75 (its `type` in it) and in
        sessions 58 to 74 (the harness settings too: both Node.earlier). A store built then keeps its judgements."""
        if judge.judge_id not in self._judge_docs:
            from clawstore.evaluate import resolve_judge_model

            # Prices (`pricing`, or its OpenClaw name `cost`) only price what was paid: declaring or editing them must
            # not re-judge anything. (`batch`: how a judgement is sent, not what it asks.) Nor do the harness's own
            # settings, nor `base_url` as written (its endpoint is: graph/keys.py JUDGE_FIELDS_NOT_IN_KEY).
            config = judge.model_dump(mode="json", exclude={"judge_id", "pricing", "batch"})
            before = {"model": resolve_judge_model(judge), "config": config,
                      "endpoint": self._endpoint(judge).identity()}
            unpriced = {k: v for k, v in config.items() if k != "cost"}
            now = {k: v for k, v in unpriced.items() if k not in JUDGE_FIELDS_NOT_IN_KEY}
            in_75 = {k: v for k, v in unpriced.items() if k not in JUDGE_FIELDS_NOT_IN_KEY_75}
            self._judge_docs[judge.judge_id] = ({**before, "config": now}, before if "cost" in config else None,
                                                {**before, "config": in_75}, {**before, "config": unpriced})
        return self._judge_docs[judge.judge_id]

    # ---- planning: each layer's nodes become known once the layer below has a record ----
    def start(self, run: Node) -> RunEvaluation:
        ev = RunEvaluation(run, expected_judges=len(self.judge_plan))
        record = run.record
        if record is None:
            ev.blocked = "the run has not been built"
        elif not record.get("cacheable"):
            ev.blocked = f"the run ended {record.get('status')}; it is retried before it is evaluated"
        else:
            case = self._case(run.item)
            doc = checks_document(record, case["checks"], case["host_inputs"], self.policy, self.checks_format,
                                  case["python_hooks"])
            earlier = partial(_checks_s75, doc) if case["python_hooks"] else None
            ev.checks = self._node("checks", run.address, doc, run, earlier=earlier)  # (its run's: no node changes one)
            if ev.checks.keyed_now is not None and _kept_no_result(self.store.get_json(ev.checks.record_id)):
                _not_found(ev.checks)
        return ev

    def plan_judges(self, ev: RunEvaluation) -> None:
        if ev.checks is None or ev.checks.record is None or ev.judges:
            return
        case = self._case(ev.run.item)
        checks_output = ev.checks.record["outputs"]["checks"]
        for judge_run, rep in self.judge_plan:
            judge = self.judges[judge_run.judge_id]
            # The judge's part now, before session 58 (with its `cost`), in session 75 (with its `type`), in sessions
            # 58 to 74 (with its harness settings too); the case's target in 75 (its rubric's whitespace as written)
            # and before (with a rubric the prompt does not show).
            now, legacy, in_75, before_75 = self._judge_parts(judge)
            document = partial(
                judge_document, ev.run.record, checks_output, anchors=self.anchors,
                system_prompt_id=self.system_prompt_id, judge_run_id=judge_run.judge_run_id, repetition=rep,
                prompt_format=self.prompt_format, redact_secrets=bool(self.policy.get("redact_secrets", True)),
                attempts=int((judge.model_extra or {}).get("attempts") or 3))
            address = {**ev.run.address, "judge_run_id": judge_run.judge_run_id, "judge_repetition": rep}
            # (every judge had its `type` in its judgements' keys before session 76: each has earlier keys)
            earlier = _earlier(document, [(case["target_id"], now), (case["target_75"], in_75),
                                          (case["target_before"], before_75)])
            node = self._node("judge", address, document(target=case["target_id"], judge=now), ev.run,
                              legacy=None if legacy is None else document(target=case["target_before"], judge=legacy),
                              earlier=earlier)
            node.judge, node.judge_run, node.subdocuments = judge, judge_run, case["subdocuments"]
            node.made = ev.checks.made  # the checks' bytes for its request (shared, read only; None if reused)
            ev.judges.append(node)

    def plan_result(self, ev: RunEvaluation) -> None:
        if ev.result is not None or ev.checks is None or ev.checks.record is None:
            return
        if len(ev.judges) != ev.expected_judges or any(j.record is None for j in ev.judges):
            return
        doc = result_document(ev.run.key, [j.record["outputs"]["judgement"] for j in ev.judges],
                              ev.checks.record["outputs"]["checks"], self.aggregation, self.sample_size, 1)
        ev.result = self._node("result", ev.run.address, doc, ev.run)
        ev.result.judge_requests = [j.record["outputs"]["request"] for j in ev.judges]
        made: dict[str, bytes] = {}
        for n in (ev.checks, *ev.judges):
            made.update(n.made or {})
        ev.result.made = made

    def _node(self, kind: str, address: dict[str, Any], doc: dict[str, Any], run: Node,
              legacy: dict[str, Any] | None = None, earlier: Earlier | None = None) -> Node:
        key, data = keyed_document(doc)
        node = Node(kind, address, doc, key, run.item, document_bytes=data)
        node.run = run
        if legacy is not None:
            legacy_key, legacy_data = keyed_document(legacy)
            node.legacy = (legacy_key, legacy, legacy_data)
        node.earlier = earlier
        # Planned node by node as runs finish: a miss does not list the index again each time (the view looks
        # again every RECHECK_S; what another build records meanwhile is adopted when claimed).
        attach_record(node, self.store, self.head, look_again=False)
        return node

    def addresses(self, evaluations: list[RunEvaluation]) -> set[str]:
        plan = [(jr.judge_run_id, rep) for jr, rep in self.judge_plan]
        found: set[str] = set()
        for ev in evaluations:
            found |= _addresses(ev.run, plan)
        return found

    # ---- building ----
    def build(self, session: BuildSession, run_nodes: list[Node]) -> tuple[list[RunEvaluation], set[str]]:
        """Checks, judgements and results of `run_nodes`, and the addresses they cover (what the campaign's head
        keeps of this layer). The budget (--max-cost) gates the judges only: checks and results cost no
        provider call. (A windowed build calls the three steps itself: builder/engine.py.)"""
        evaluations, judges = self.prepare(session, run_nodes)
        execute_nodes(session, self.judge_phase(session, judges, len(run_nodes)), self.judge_work(session), paid=True,
                      lane_of=self.judge_lane)
        return self.conclude(session, evaluations), self.addresses(evaluations)

    def prepare(self, session: BuildSession, run_nodes: list[Node]) -> tuple[list[RunEvaluation], list[Node]]:
        """The runs' evaluations with their checks built and their judgements planned; the judgements left to
        execute one by one (those a provider batch handles are handled here)."""
        options = session.options
        evaluations = [self.start(run) for run in run_nodes]
        self._layer(session, [ev.checks for ev in evaluations if ev.checks], self._exec_checks, "checks",
                    here=_declarative)
        session.progress.evaluated("checks", len(run_nodes))
        for ev in evaluations:
            self.plan_judges(ev)
        judges = [j for ev in evaluations for j in ev.judges]
        self._check_keys([j for j in judges if options.force or not j.fresh])
        stale = [j for j in judges if options.force or not j.fresh]
        by_batch = [j for j in stale if options.batch or _batch_judge(j.judge)]
        if by_batch or (stale and self._batches_pending()):
            from clawstore.builder.eval_batch import batch_judges

            # Without --batch too: what a batch stands for is collected, never asked again one by one.
            handled = batch_judges(self, session, stale, by_batch)
            judges = [j for j in judges if id(j) not in handled]
        self._note_artifact_readers(evaluations, judges, options.force)
        return evaluations, judges

    def _note_artifact_readers(self, evaluations: list[RunEvaluation], judges: list[Node], force: bool) -> None:
        """Which judgements still read each run's kept artifact (its checks have): the bytes are dropped once the last
        of them built its request (`judge_request`), not when the window concludes; at once for a run none reads."""
        left: dict[Node, set[int]] = {}
        for judge in judges:
            if (force or not judge.fresh) and judge.run is not None and judge.run.made is not None:
                left.setdefault(judge.run, set()).add(id(judge))
        for ev in evaluations:
            if ev.run.made is not None and ev.run not in left:
                ev.run.made = None
        self._artifact_readers.update(left)

    def _artifact_read(self, node: Node) -> None:
        """`node`'s request has the run's artifact: the run's kept bytes go when no other judgement needs them.
        (Judgements of one run may build their requests at once on two workers: set and dict calls are atomic.)"""
        run = node.run
        readers = self._artifact_readers.get(run) if run is not None else None
        if readers is None:
            return
        readers.discard(id(node))
        if not readers and self._artifact_readers.pop(run, None) is not None:
            run.made = None

    def judge_phase(self, session: BuildSession, judges: list[Node], runs: int) -> list[Node]:
        """Log the fresh judgements (of `runs` runs) as reused and show the layer; the stale ones, to execute."""
        stale = self._phase(session, judges, "judges")
        session.progress.evaluated("judges", runs)
        return stale

    def judge_work(self, session: BuildSession) -> Callable[[Node], Stored]:
        """What executes one judgement of this build (`execute_nodes`' work)."""
        build_id = session.log.build_id
        return lambda node: self._exec_judge(node, build_id)

    def conclude(self, session: BuildSession, evaluations: list[RunEvaluation]) -> list[RunEvaluation]:
        """Once the judgements are done: the results, and why an evaluation has none."""
        for ev in evaluations:
            self.plan_result(ev)
        self._layer(session, [ev.result for ev in evaluations if ev.result], self._exec_result, "results",
                    here=lambda node: True)
        session.progress.evaluated("results", len(evaluations))
        for ev in evaluations:
            self._artifact_readers.pop(ev.run, None)  # (judgements that never started: skipped, or a budget's stop)
            for n in (ev.run, *ev.nodes()):
                n.made = None  # what the results read (or would have) is no longer needed: memory per window
            waiting = [n for n in (ev.run, *ev.judges) if n.batch]
            if ev.result is None and waiting:
                ev.pending = f"{len(waiting)} request(s) pending in provider batch(es)"
            elif ev.blocked is None and ev.result is None:
                ev.blocked = "an upstream evaluation node failed"
        return evaluations

    def _batches_pending(self) -> bool:
        from clawstore.builder.batch_doc import REF_PREFIX

        return bool(self.store.list_refs(REF_PREFIX))

    def _check_keys(self, judges: list[Node]) -> None:
        for endpoint in {self._endpoint(j.judge) for j in judges}:
            endpoint.api_key()  # a missing key fails before any request

    def judge_endpoint(self, node: Node) -> Endpoint:
        return self._endpoint(node.judge)

    def judge_lane(self, node: Node) -> Lane:
        judge = node.judge
        model = self._judge_doc(judge)["model"]
        return Lane(self._endpoint(judge).base_url, model, label=f"judge {model}")

    def _layer(self, session: BuildSession, nodes: list[Node], work: NodeWork, label: str,
               here: Callable[[Node], bool] | None = None) -> None:
        """Reuse the layer's fresh nodes, execute its stale ones: those `here` picks in this thread (cheap local work:
        a worker thread's hand-off cost more), the others on the build's workers."""
        build_id = session.log.build_id
        stale = self._phase(session, nodes, label)

        def run(node: Node) -> tuple[str, dict[str, Any]]:
            return self._batched(work, node, build_id)

        if here is None:
            execute_nodes(session, stale, run, paid=False)
            return
        local = [n for n in stale if here(n)]
        execute_nodes(session, local, run, paid=False, here=True)
        if len(local) < len(stale):
            picked = {id(n) for n in local}
            execute_nodes(session, [n for n in stale if id(n) not in picked], run, paid=False)

    def _phase(self, session: BuildSession, nodes: list[Node], label: str) -> list[Node]:
        log = session.log
        stale, fresh = partition(nodes, session.options.force)
        for node in fresh:
            node.action = "reuse"
            record_under_key_now(session.store, node)  # (found under its legacy key: named by its key now)
            log.add(node.kind, node.key, node.record_id, "reuse", node.address, node.record)
            node.release()
        session.progress.phase(label, stale, [n for n in nodes if n.action == "reuse"])
        return stale

    def _batched(self, work: NodeWork, node: Node, build_id: str) -> tuple[str, dict[str, Any]]:
        with self.store.batch():  # one durable flush for a node's outputs, record and cache entry
            return work(node, build_id)

    def _evidence(self, run: Node) -> tuple[dict[str, Any], TreeSandboxFiles | None, TreeWorkspaceFiles | None]:
        """The run's artifact (from the bytes its run node kept when this build made it: builder/run_exec.py
        `record_run`), sandbox and workspace."""
        outputs = run.record["outputs"]
        artifact = self._made_json(run, outputs["artifact"])
        sandbox = TreeSandboxFiles(self.store, outputs["sandbox"]) if outputs.get("sandbox") else None
        workspace = TreeWorkspaceFiles(self.store, outputs["workspace"]) if outputs.get("workspace") else None
        return artifact, sandbox, workspace

    def _record(self, node: Node, *, status: str, cacheable: bool, outputs: dict[str, Any],
                metrics: dict[str, Any], summary: dict[str, Any], error: dict[str, Any] | None,
                started_at: str, build_id: str) -> tuple[str, dict[str, Any]]:
        run = node.run
        outputs = {**outputs, "input_document": put_input(self.store, node)}
        record = make_record(kind=node.kind, key=node.key, address=node.address, status=status,
                             cacheable=cacheable, outputs=outputs, metrics=metrics,
                             summary={"run_key": run.key, **summary, **node.address}, error=error,
                             started_at=started_at, finished_at=utc_now(), build_id=build_id)
        record_id = self.store.put_action(node.key, record)
        record_under_legacy_key(self.store, node, record)
        return record_id, record

    def execute_checks(self, node: Node, build_id: str) -> tuple[str, dict[str, Any]]:
        """Run the deterministic checks of one run (local, no provider call) and store their record."""
        return self._batched(self._exec_checks, node, build_id)

    def _exec_checks(self, node: Node, build_id: str) -> tuple[str, dict[str, Any]]:
        from clawstore.evaluate import evaluate_checks, hooks

        started_at, began = utc_now(), time.monotonic()
        run = node.run
        artifact, sandbox, workspace = self._evidence(run)
        case = run.item.case
        result = evaluate_checks(self._check_specs(run.item), artifact, sandbox_files=sandbox,
                                 workspace_files=workspace, case_source_path=case.path, security=self.policy,
                                 hook_timeout_s=hooks.DEFAULT_HOOK_TIMEOUT_S)
        summary = result["summary"]
        fault = hook_fault(result["checks"])
        return self._record(
            node, status=fault[0] if fault else "success", cacheable=fault is None,
            outputs={"checks": self._put_kept(node, result)},
            metrics={"latency_s": round(time.monotonic() - began, 6)},
            summary={"passed": summary.get("passed_checks", 0), "failed": summary.get("failed_checks", 0),
                     "error": summary.get("error_checks", 0),
                     "checks": [{k: c.get(k) for k in ("check_id", "kind", "outcome", "message", "dimensions")}
                                for c in result["checks"]]},
            error=fault[1] if fault else None, started_at=started_at, build_id=build_id)

    def _put_kept(self, node: Node, value: Any) -> str:
        """`put_json(value)`, its bytes kept on `node` for its run's result node, which would read them back (an index
        look-up, a read, a decompression and a hash check for bytes this build just made)."""
        data = canonical_json(value)
        oid = self.store.put_bytes(data)
        node.made = {oid: data}
        return oid

    def _made_json(self, node: Node, oid: str) -> Any:
        """What `store.get_json(oid)` returns, from the bytes an earlier node of this window kept when it has them."""
        data = (node.made or {}).get(oid)
        return self.store.get_json(oid) if data is None else jsontext.loads(data)

    def _check_specs(self, item: CampaignItem) -> list[dict[str, Any]]:
        """The case's checks as evaluate_checks reads them, made once per case (not a model_dump per check and run)."""
        from clawstore.evaluate.specs import check_spec

        case = self._case(item)
        if "check_specs" not in case:
            case["check_specs"] = [check_spec(c) for c in item.case.case.deterministic_checks]
        return case["check_specs"]

    def _exec_judge(self, node: Node, build_id: str) -> tuple[str, dict[str, Any]]:
        started_at, began = utc_now(), time.monotonic()
        body = self.judge_request(node)
        endpoint, timeout, retries = self._judge_transport(node.judge)

        def chat(request: dict[str, Any]) -> ChatResult:
            assert self.client is not None, "a build's client"
            return self.client.chat(endpoint, request, timeout=timeout, retries=retries)

        return self.judge_with(node, chat, body, started_at, began, build_id)

    def judge_with(self, node: Node, chat: Callable[[dict[str, Any]], ChatResult], body: dict[str, Any],
                   started_at: str, began: float, build_id: str,
                   extra_summary: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Ask `chat` (the provider, or a batch line's answer first: eval_batch.py) for one judge
        repetition and record it."""
        from clawstore.evaluate import run_judge_iteration

        judge_run = node.judge_run
        iteration = run_judge_iteration(chat, body, node.document["attempts"], judge_run_id=judge_run.judge_run_id,
                                        repetition=node.address["judge_repetition"],
                                        redact_secrets=bool(self.policy.get("redact_secrets", True)))
        iteration.judge_model = body["model"]
        latency_s = time.monotonic() - began
        cost = iteration.usage.get("cost_usd")
        # The judge's answer is paid for: if the store refuses it, the build keeps it to retry.
        return store_answer(node, lambda: self.record_judgement(node, iteration, body, started_at, latency_s, build_id,
                                                                extra_summary=extra_summary),
                            float(cost) if isinstance(cost, (int, float)) else None)

    def judge_request(self, node: Node) -> dict[str, Any]:
        """The chat body of one judge repetition (rebuilt from the store: the same every time; the checks from the
        bytes their node kept this window, when it has them)."""
        from clawstore.evaluate import build_judge_evidence, build_judge_request, render_judge_prompt

        run, judge = node.run, node.judge
        redact = bool(self.policy.get("redact_secrets", True))
        artifact, sandbox, workspace = self._evidence(run)
        self._artifact_read(node)
        checks = self._made_json(node, node.document["checks"])
        evidence = build_judge_evidence(artifact, sandbox_files=sandbox, workspace_files=workspace,
                                        redact_secrets=redact)
        user_prompt = render_judge_prompt(self._case(run.item)["target"], evidence, checks, self.anchors,
                                          redact_secrets=redact)
        return build_judge_request(judge, self.system_prompt, user_prompt, node.address["judge_repetition"])

    def _judge_transport(self, judge: JudgeConfig) -> tuple[Endpoint, float, int]:
        """(endpoint, timeout, retries) of a judge's synchronous requests."""
        extras = judge.model_extra or {}
        timeout = float(extras.get("timeout_seconds") or JUDGE_TIMEOUT_S)
        retries = int(extras.get("retries") if extras.get("retries") is not None else JUDGE_RETRIES)
        return self._endpoint(judge), timeout, retries

    def record_judgement(self, node: Node, iteration: JudgeIteration, body: dict[str, Any], started_at: str,
                         latency_s: float, build_id: str, extra_outputs: dict[str, Any] | None = None,
                         extra_summary: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Store one judge repetition's outcome under the judge node's key, in one durable batch
        (the build after asking the judge; importers with a judgement made elsewhere)."""
        run, judge = node.run, node.judge
        usage = iteration.usage
        scores = iteration.scores
        last_error = next((a.get("error") for a in reversed(iteration.attempts) if a.get("error")), None)
        extras = dict(judge.model_extra or {})
        metrics = record_cost(judge_metrics(usage, latency_s), extras, usage.get("cost_source"),
                              counts_alone=counts_alone_unknown(usage), nothing_sent=usage.get("nothing_sent") is True)
        metrics = with_known_part(metrics, usage, extras, not (usage.get("usage_rejected") or usage.get(
            "tokens_unknown")))  # (what it spent at least, when unknown)
        summary = {"judge_id": judge.judge_id, "judge_model": body["model"],
                   "overall_score": scores.overall_score if scores else None,
                   "dimensions": dict(scores.dimensions) if scores else None,
                   **({} if iteration.requests is None else {"attempts": iteration.requests}), **(extra_summary or {})}
        if warned := [w for w in iteration.warnings if is_dense_warning(w)]:  # (said by the build: progress.py)
            summary["prompt_warning"] = "; ".join(warned)
        error = None if iteration.status == "success" else {
            "code": f"judge_{iteration.status}", "message": str(last_error or "; ".join(iteration.warnings))[:500]}
        case = self._case(run.item)
        with self.store.batch():  # one durable flush for the judgement, its record and cache entry
            # What `explain` diffs the prompt and target by: the same for every judgement of a build (of a case),
            # so put again only until a put of them is durable.
            if not self._prompt_stored:
                self.store.put_bytes(self.system_prompt.encode("utf-8"))
                self.store.when_durable(self._note_prompt_stored)
            if not case.get("target_stored"):
                self.store.put_json(case["target_doc"])
                self.store.when_durable(lambda: case.update(target_stored=True))
            outputs = {"judgement": self._put_kept(node, iteration.to_dict()), "request": self.store.put_json(body),
                       **(extra_outputs or {})}
            return self._record(node, status=iteration.status, cacheable=iteration.status == "success",
                                outputs=outputs, metrics=metrics, summary=summary, error=error,
                                started_at=started_at, build_id=build_id)

    def _note_prompt_stored(self) -> None:
        self._prompt_stored = True

    def _exec_result(self, node: Node, build_id: str) -> tuple[str, dict[str, Any]]:
        from clawstore.evaluate import aggregate, render_result_summary_md

        started_at = utc_now()
        iterations = [self._made_json(node, oid) for oid in node.document["judgements"]]
        checks = self._made_json(node, node.document["checks"])
        aggregation = node.document["aggregation"]
        final = aggregate(iterations, aggregation.get("method", "median"), aggregation.get("pass_threshold"),
                          node.document["sample_size"])
        summary_md = render_result_summary_md(final, checks, iterations)
        judges_ok = all(i.get("status") == "success" for i in iterations)
        counts = checks.get("summary") or {}
        error = None
        if final.status != "success":
            error = {"code": "no_successful_judgement", "message": "; ".join(final.warnings)[:500]}
        elif not judges_ok:
            error = {"code": "judge_iterations_failed",
                     "message": "some judge repetitions failed; they are retried by the next build"}
        return self._record(
            node, status=final.status, cacheable=final.status == "success" and judges_ok,
            outputs={"result": self.store.put_json(final.to_dict()),
                     "summary_md": self.store.put_bytes(summary_md.encode("utf-8")),
                     "judge_requests": node.judge_requests},
            metrics={},
            summary={"final_score": final.final_score, "final_dimensions": final.final_dimensions,
                     "passed": final.passed, "aggregation_method": final.method,
                     "pass_threshold": final.pass_threshold, "judge_iterations": final.counts.get("iterations"),
                     "judge_successful": final.counts.get("successful"),
                     "checks_total": counts.get("total_checks"), "checks_passed": counts.get("passed_checks"),
                     "checks_failed": counts.get("failed_checks")},
            error=error, started_at=started_at, build_id=build_id)
