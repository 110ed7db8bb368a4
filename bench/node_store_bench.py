"""A node's stored work alone, as a build does it: in a batch under group commit, its artifact (new bytes), its input
document (new bytes, already canonical) and its record by `make_record` and `put_action` (the record, the entry),
then the batch's end (the queued objects and the entry in one write, the hand-over to the group). No provider, no
scheduling: the thread CPU of N nodes in one thread, µs a node.

Usage: python bench/node_store_bench.py [--nodes 10000] [--rounds 3] [--profile [--sort cumulative]]
(run it with PYTHONPATH naming the tree to measure)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from clawstore.graph.records import make_record
from clawstore.store.store import Store
from clawstore.values.canonical import canonical_json
from clawstore.values.clock import utc_now


def _artifact(i: int) -> dict[str, Any]:
    """About the size and shape of a run's artifact (~1.5 KB)."""
    return {"status": "ok", "case_id": f"case_{i:06d}", "model": "bench/m", "started_at": utc_now(),
            "messages": [{"role": "system", "content": "You answer briefly."},
                         {"role": "user", "content": f"Question {i}: " + "what is the answer? " * 12}],
            "response": {"content": f"Answer {i} " + "because of reasons " * 30, "finish_reason": "stop"},
            "usage": {"prompt_tokens": 120 + i % 7, "completion_tokens": 80 + i % 11, "cost_usd": 1.5e-05 * (i % 5)},
            "latency_s": 0.0123 + i * 1e-7}


def _document(i: int) -> bytes:
    """An input document's canonical bytes (~700 B), as planning keeps them."""
    return canonical_json({"kind": "run", "case": {"case_id": f"case_{i:06d}", "input": {"prompt": "x" * 300}},
                           "model": {"model_id": "m", "endpoint": {"base_url": "http://127.0.0.1:1/v1"}},
                           "settings": {"temperature": 0.0, "max_tokens": 256}, "repetition": i % 3})


def one_round(nodes: int, root: Path) -> float:
    """Thread CPU of `nodes` nodes' stored work, seconds."""
    work = [(_artifact(i), _document(i)) for i in range(nodes)]
    store = Store(root)
    try:
        with store.group_commit():
            began = time.thread_time()
            for i, (artifact, document) in enumerate(work):
                with store.batch():
                    outputs = {"artifact": store.put_bytes(canonical_json(artifact)),
                               "input_document": store.put_bytes(document)}
                    key = f"blake3:{i:064x}"
                    record = make_record(
                        kind="run", key=key, address={"model_id": "m", "case_id": f"case_{i:06d}", "repetition": 0},
                        status="ok", cacheable=True, outputs=outputs,
                        metrics={"latency_s": 0.01, "input_tokens": 120, "output_tokens": 80, "cost_usd": 1e-05},
                        summary={"model_id": "m", "case_id": f"case_{i:06d}", "requested_model": "bench/m"},
                        error=None, started_at=utc_now(), finished_at=utc_now(), build_id="b" * 32)
                    store.put_action(key, record)
            spent = time.thread_time() - began
    finally:
        store.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="one round under cProfile, its top functions")
    parser.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"), help="the profile's order")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claw-nodestore-") as scratch:
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            one_round(args.nodes, Path(scratch) / "p")
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stdout).sort_stats(args.sort).print_stats(45)
            return
        times = [one_round(args.nodes, Path(scratch) / f"r{r}") / args.nodes * 1e6 for r in range(args.rounds)]
    print(f"{args.nodes} nodes: " + ", ".join(f"{t:.1f}" for t in times)
          + f" us a node (median {statistics.median(times):.1f})")


if __name__ == "__main__":
    main()
