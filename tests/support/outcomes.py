"""What a build's runs must give wherever they ran (the in-process executor or a Ray cluster): the
same requests sent, the same answers stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawstore.graph.explain import read_head
from clawstore.store import Store
from clawstore.testing.standin import StandIn
from clawstore.values.canonical import canonical_json


def run_outcomes(store_root: Path) -> list[tuple[Any, ...]]:
    """Per run of the store's one campaign, in address order: its address, key (its input document),
    status, sandbox tree, and from its stored artifact the request it made, its usage and its answer
    (everything but the clock: timings and timestamps differ from one execution to the next)."""
    store = Store(store_root, create=False)
    (ref,) = store.list_refs("campaigns/")
    _, nodes = read_head(store, ref)
    runs = sorted((node for node in nodes.values() if node.kind == "run"),
                  key=lambda node: canonical_json(node.address))
    outcomes = []
    for node in runs:
        record = node.record_doc
        assert record is not None
        artifact = store.get_json(record["outputs"]["artifact"])
        answer = [event["content"] for event in artifact["trace"] if event["event_type"] == "final_output"]
        outcomes.append((node.address, node.key, record["status"], record["outputs"].get("sandbox"),
                         artifact["request"], artifact["usage"], answer))
    return outcomes


def request_bodies(standin: StandIn) -> list[bytes]:
    """Every request body the provider received, byte for byte (canonical JSON), in sorted order."""
    return sorted(canonical_json(request["body"]) for request in standin.requests)
