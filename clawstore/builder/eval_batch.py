"""`--batch` for the judge layer: judgements go to the provider's Batch API (builder/batch_layer.py).

A batch line's answer is recorded exactly as a synchronous judgement is (`EvalLayer.judge_with`: the
same contract check, the same record): it is the judge's first attempt; an invalid answer is asked
again synchronously, as the synchronous path retries it. Its cost is the provider's reported cost,
or the judge's declared `pricing` times its `batch` factor (`cost_source: priced`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from clawstore.builder.batch_layer import BatchKind, FirstAnswer, batch_layer
from clawstore.graph.plan import Node
from clawstore.providers.batch_api import LineAnswer
from clawstore.values.clock import utc_now
from clawstore.values.costs import declared_prices

if TYPE_CHECKING:
    from clawstore.builder.batch_doc import BatchDoc
    from clawstore.builder.clients import ChatClient
    from clawstore.builder.refused import Refusals
    from clawstore.builder.session import BuildSession
    from clawstore.builder.unstored import Stored
    from clawstore.config.models import JudgeConfig
    from clawstore.providers.client import ChatResult
    from clawstore.providers.endpoint import Endpoint
    from clawstore.store.store import Store


class EvalLayer(Protocol):
    """What judging by batch needs of builder/eval_layer.py's EvalLayer (which imports this module)."""

    store: Store
    client: ChatClient | None

    def _endpoint(self, judge: JudgeConfig) -> Endpoint: ...

    def _judge_transport(self, judge: JudgeConfig) -> tuple[Endpoint, float, int]: ...

    def judge_request(self, node: Node) -> dict[str, Any]: ...

    def judge_with(self, node: Node, chat: Callable[[dict[str, Any]], ChatResult], body: dict[str, Any],
                   started_at: str, began: float, build_id: str,
                   extra_summary: dict[str, Any] | None = None) -> Stored: ...


def batch_judges(layer: EvalLayer, session: BuildSession, judges: list[Node], to_submit: list[Node]) -> set[int]:
    """`batch_layer` for judgements: the ids of the judge nodes handled by batch."""
    def request(node: Node) -> tuple[Endpoint, dict[str, Any], Any]:
        judge = node.judge
        return layer._endpoint(judge), layer.judge_request(node), declared_prices(judge.model_extra or {})

    how = BatchKind("judge", "judges (batch)", request, lambda n, a, d: record_line(layer, n, a, d, session.refusals))
    return batch_layer(how, session, judges, to_submit)


def record_line(layer: EvalLayer, node: Node, answer: LineAnswer, doc: BatchDoc,
                refusals: Refusals | None = None) -> tuple[str, dict[str, Any]]:
    """Record one batch line as the judgement of `node` (the caller holds the node's claim; `refusals`: the build's
    endpoints out of credit, which a line refused with a final 402 adds its endpoint to)."""
    began = time.monotonic()
    judge = node.judge
    endpoint, timeout, retries = layer._judge_transport(judge)
    client = FirstAnswer(answer, layer.client, declared_prices(judge.model_extra or {}), doc, refusals)

    def chat(request: dict[str, Any]) -> ChatResult:
        return client.chat(endpoint, request, timeout=timeout, retries=retries)

    body, node.batch_body = node.batch_body or layer.judge_request(node), None  # the same bytes either way
    return layer.judge_with(node, chat, body, utc_now(), began, doc.build_id, extra_summary={"batch": client.summary})
