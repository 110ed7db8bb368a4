"""`--batch` for runs: an `llm_probe` run that enables no tool is one chat request, so it goes by batch too.

Its request is the one the runner would send (the runner is asked for it: `_Capture`), and its line's
answer is handed to the same runner and recorded by the same code as a synchronous run
(`execute_llm_probe`). OpenClaw runs and runs with tools run as always.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawstore.builder.batch_layer import BatchKind, FirstAnswer, batch_layer
from clawstore.builder.run_exec import execute_llm_probe, llm_probe_spec
from clawstore.graph.plan import Node
from clawstore.providers.batch_api import LineAnswer
from clawstore.values.costs import declared_prices

if TYPE_CHECKING:
    from clawstore.builder.batch_doc import BatchDoc
    from clawstore.builder.clients import ChatClient
    from clawstore.builder.session import BuildSession
    from clawstore.providers.client import ChatResult
    from clawstore.providers.endpoint import Endpoint

class _Captured(BaseException):
    """Stops the runner at its first request (a BaseException: the runner records any Exception)."""

    def __init__(self, body: dict[str, Any]):
        super().__init__("captured")
        self.body = body


class _Capture:
    def chat(self, endpoint: Endpoint, body: dict[str, Any], timeout: float | None = None,
             retries: int = 5) -> ChatResult:
        raise _Captured(body)


def single_request(node: Node) -> bool:
    """An llm_probe run whose case enables no tool: exactly one chat request."""
    from clawstore.runners.tools import enabled_tools

    return node.item.runner_type == "llm_probe" and not enabled_tools(llm_probe_spec(node).tools)


def run_request(node: Node) -> tuple[Endpoint, dict[str, Any], Any] | None:
    """(endpoint, the body the runner sends, the suite model's pricing); None when the runner sends
    nothing (invalid settings: it is recorded one by one, as always)."""
    from clawstore.runners.llm_probe import run_llm_probe

    spec = llm_probe_spec(node)
    try:
        run_llm_probe(spec, _Capture(), None)
    except _Captured as captured:
        return spec.endpoint, captured.body, declared_prices(node.item.model.model_extra or {})
    return None


def batch_runs(session: BuildSession, stale: list[Node], client: ChatClient) -> set[int]:
    """`batch_layer` for runs: the ids of the run nodes handled by batch (submitted with --batch)."""
    nodes = [n for n in stale if single_request(n)]

    def record(node: Node, answer: LineAnswer, doc: BatchDoc) -> tuple[str, dict[str, Any]]:
        first = FirstAnswer(answer, client, declared_prices(node.item.model.model_extra or {}), doc, session.refusals)
        node.batch_summary = first.summary  # (the record names the batch and its cost's source)
        return execute_llm_probe(node, llm_probe_spec(node), session.store, first, doc.build_id)

    how = BatchKind("run", "runs (batch)", run_request, record)
    return batch_layer(how, session, nodes, nodes if session.options.batch else [])
