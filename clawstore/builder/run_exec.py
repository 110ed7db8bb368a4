"""Execute one run node: call its runner, store its outputs, then its record, then the cache entry."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from clawstore.builder.legacy_keys import record_under_legacy_key
from clawstore.builder.unstored import store_answer
from clawstore.graph.plan import Node, put_input
from clawstore.graph.records import kept_outcome, make_record
from clawstore.host.scratch import OwnedScratch, scratch_dir
from clawstore.providers.errors import ProviderError
from clawstore.providers.usage import counts_alone_unknown, stored_tokens
from clawstore.runners.pricing import record_cost, with_known_part
from clawstore.store.documents import TOKEN_METRICS
from clawstore.values.canonical import canonical_json
from clawstore.values.clock import utc_now
from clawstore.values.counts import counted

if TYPE_CHECKING:
    from clawstore.builder.clients import ChatClient, OpenClawCluster
    from clawstore.builder.refused import Refusals
    from clawstore.config.messages import ResolvedMessage
    from clawstore.runners.llm_probe import LlmProbeSpec
    from clawstore.runners.openclaw import OpenClawSpec
    from clawstore.store.store import Store


# An artifact kept for its evaluation is held until its judgements have their requests (at the latest until its window
# concludes): a long one is read back instead, which costs little beside its parse, so that a build's memory does not
# grow with its replies.
KEEP_ARTIFACT_MAX = 8 * 1024


def _metrics(usage: dict[str, Any], latency: float, model_extras: dict[str, Any]) -> dict[str, Any]:
    normalized = usage.get("normalized") or {}
    known = not (usage.get("usage_rejected") or usage.get("tokens_unknown"))  # (never 0 for counts nobody sent)
    metrics = record_cost({
        **stored_tokens(normalized, TOKEN_METRICS, known=known),
        "cost_usd": usage.get("cost_usd"),
        "latency_s": round(latency, 6),
    }, model_extras, usage.get("cost_source"), counts_alone=counts_alone_unknown(usage),
        nothing_sent=usage.get("nothing_sent") is True)
    return with_known_part(metrics, usage, model_extras, known)  # (what it spent at least, when unknown)


def record_run(store: Store, node: Node, artifact: dict[str, Any], outputs: dict[str, Any], latency: float,
               started_at: str, build_id: str, keep: bool = False) -> tuple[str, dict[str, Any]]:
    """Objects first, then the record, then the action-cache entry (the store's write order). `keep`: the artifact's
    bytes (up to KEEP_ARTIFACT_MAX) kept on `node.made` for its checks and judgements, which read it next
    (builder/eval_layer.py drops them once its judgements have their requests)."""
    outputs = dict(outputs)
    artifact_bytes = canonical_json(artifact)
    outputs["artifact"] = store.put_bytes(artifact_bytes)
    outputs["input_document"] = put_input(store, node)
    for attachment in node.item.attachments:
        store.put_bytes(attachment.data)
    status = artifact["status"]
    error = artifact.get("error")
    metrics = _metrics(artifact.get("usage") or {}, latency, dict(node.item.model.model_extra or {}))
    record = make_record(
        kind="run", key=node.key, address=node.address, status=status,
        cacheable=kept_outcome(status, error), outputs=outputs, metrics=metrics,
        summary={
            **node.address,
            "requested_model": node.item.resolved_model,
            "runner_type": node.item.runner_type,
            "endpoint": (node.document["model"].get("endpoint") or {}).get("base_url"),
            "error_code": (error or {}).get("code"),
            "error_message": (error or {}).get("message"),
            # the requests it sent, retries included (`claw query`'s runs.attempts), when its runner counts them
            **counted("attempts", (artifact.get("runner_metadata") or {}).get("attempt_count")),
            **({"batch": node.batch_summary} if node.batch_summary is not None else {}),
            # a prompt its server may have cut (runners/llm_probe.py), said by the build that paid for it
            **({"prompt_warning": "; ".join(warned)} if (warned := (artifact.get("runner_metadata") or {}).get(
                "warnings")) else {}),
        },
        error={"code": error.get("code"), "message": error.get("message")} if error else None,
        started_at=started_at, finished_at=utc_now(), build_id=build_id,
    )
    record_id = store.put_action(node.key, record)
    record_under_legacy_key(store, node, record)
    if keep and len(artifact_bytes) <= KEEP_ARTIFACT_MAX:
        node.made = {outputs["artifact"]: artifact_bytes}
    return record_id, record


def _cost(artifact: dict[str, Any]) -> float | None:
    cost = (artifact.get("usage") or {}).get("cost_usd")
    return float(cost) if isinstance(cost, (int, float)) else None


def message_doc(m: ResolvedMessage) -> dict[str, Any]:
    """A resolved message as a runner's spec holds it."""
    return {"role": m.role, "content": m.content, **({"name": m.name} if m.name else {}),
            **({"metadata": m.metadata} if m.metadata else {})}


def llm_probe_spec(node: Node) -> LlmProbeSpec:
    """What the llm_probe runner needs to execute a run node (made when it executes, or is batched)."""
    from clawstore.runners.llm_probe import LlmProbeSpec

    item = node.item
    assert item is not None and node.endpoint is not None, "a planned run node"
    context = item.case.case.input.context or {}
    probe = context.get("llm_probe") or {}
    return LlmProbeSpec(
        case_id=item.case.case.case_id,
        requested_model=item.resolved_model,
        endpoint=node.endpoint,
        settings=dict(item.settings),
        messages=[message_doc(m) for m in item.messages],
        tools=list(probe.get("tools") or []),
        tool_choice=probe.get("tool_choice"),
    )


def execute_llm_probe(node: Node, spec: LlmProbeSpec, store: Store, client: ChatClient,
                      build_id: str, keep: bool = False) -> tuple[str, dict[str, Any]]:
    from clawstore.host.run_limits import workspace_problem
    from clawstore.runners.llm_probe import run_llm_probe
    from clawstore.runners.tools import enabled_tools
    from clawstore.store.trees import empty_tree

    started_at = utc_now()
    began = time.monotonic()
    # A run without tools has nothing to act in: no directory to make, snapshot and remove.
    tmp = OwnedScratch("claw-run-") if enabled_tools(spec.tools) else None
    sandbox = Path(tmp.path) / "sandbox" if tmp is not None else None
    if sandbox is not None:
        sandbox.mkdir()
    try:
        artifact = run_llm_probe(spec, client, sandbox)
    except BaseException:
        if tmp is not None:
            tmp.remove()
        raise
    latency = time.monotonic() - began
    artifact_json = artifact.to_json() if hasattr(artifact, "to_json") else artifact

    # A sandbox too big to keep (a shell command can make files of any size) is left out; the answer,
    # paid for, is kept and scored as it is: its checks find no files.
    too_big = workspace_problem(sandbox) if sandbox is not None else None
    if too_big is not None:
        artifact_json["runner_metadata"]["sandbox"].update(kept=False, not_kept=too_big)

    def write() -> tuple[str, dict[str, Any]]:
        with store.batch():  # one durable flush for all of the run's objects, record and cache entry
            kept = sandbox is not None and too_big is None
            outputs = {"sandbox": store.put_tree(sandbox, escape_names=True) if kept else empty_tree(store)}
            return record_run(store, node, artifact_json, outputs, latency, started_at, build_id, keep)

    def cleanup() -> None:
        if tmp is not None:
            tmp.remove()

    # The answer is paid for: if the store refuses it, the build keeps it (and its sandbox) to retry.
    return store_answer(node, write, _cost(artifact_json), cleanup)


def execute_openclaw(node: Node, spec: OpenClawSpec, store: Store, build_id: str,
                     cluster: OpenClawCluster | None = None, refusals: Refusals | None = None
                     ) -> tuple[str, dict[str, Any]]:
    """Run one OpenClaw case here, or on a Ray cluster (`cluster`: builder/ray_client.py), then record it. An agent
    whose provider refused it with a final 402 refuses the node's endpoint for the rest of the build (`refusals`)."""
    from clawstore.runners.openclaw import run_openclaw
    from clawstore.runners.openclaw.runner import OUT_OF_CREDIT

    started_at = utc_now()
    began = time.monotonic()
    made: dict[str, bytes] = {}
    if cluster is not None:
        outcome, made = cluster.run_openclaw(spec, tree_contents(store, spec.agent_tree))
    else:
        with scratch_dir("claw-run-") as tmp:
            outcome = run_openclaw(spec, store, Path(tmp), build_id=build_id)
    latency = time.monotonic() - began
    error = outcome.artifact.get("error") or {}
    if refusals is not None and node.endpoint is not None and error.get("code") == OUT_OF_CREDIT:
        refusals.refuse(node.endpoint, str((error.get("metadata") or {}).get("provider_message") or "HTTP 402"))

    def write() -> tuple[str, dict[str, Any]]:
        with store.batch():
            for oid, data in sorted(made.items()):  # what the node stored: each must be what its id says
                if store.put_bytes(data) != oid:
                    raise ProviderError("transport_error", f"the Ray node returned object {oid} with other "
                                        "content", retryable=True)
            return record_run(store, node, outcome.artifact, dict(outcome.outputs), latency, started_at, build_id)

    return store_answer(node, write, _cost(outcome.artifact))


def tree_contents(store: Store, tree: str) -> dict[str, bytes]:
    """A tree object and the files it names, by id (what a Ray node needs to check the tree out)."""
    from clawstore.store.trees import tree_objects

    return {oid: store.get_bytes(oid) for oid in (tree, *tree_objects(store, tree))}


Stored = tuple[str, dict[str, Any]]  # a run's record id and record


class RunExecutor(Protocol):
    """Executes the runs of one runner type (`execute`: the node's record id and record, once stored)."""

    def execute(self, node: Node, build_id: str) -> Stored: ...


class LlmProbeRuns:
    """llm_probe runs: each node's request loop over the build's one provider client; `keep_artifacts`: each run's
    artifact bytes kept on its node for the evaluation that reads them next (an evaluated build's)."""

    def __init__(self, store: Store, client: ChatClient, keep_artifacts: bool = False) -> None:
        self.store = store
        self.client = client
        self.keep_artifacts = keep_artifacts

    def execute(self, node: Node, build_id: str) -> Stored:
        return execute_llm_probe(node, llm_probe_spec(node), self.store, self.client, build_id,  # spec made to run
                                 self.keep_artifacts)


class OpenClawRuns:
    """openclaw runs, by the spec planning made of each (model id, case id), here or on a Ray cluster."""

    def __init__(self, specs: dict[tuple[str, str], OpenClawSpec], store: Store,
                 cluster: OpenClawCluster | None, refusals: Refusals | None = None) -> None:
        self.specs = specs
        self.store = store
        self.cluster = cluster
        self.refusals = refusals  # the build's endpoints out of credit: an agent's 402 adds its own

    def execute(self, node: Node, build_id: str) -> Stored:
        spec = self.specs[(node.address["model_id"], node.address["case_id"])]
        return execute_openclaw(node, spec, self.store, build_id, self.cluster, self.refusals)
